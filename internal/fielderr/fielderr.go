// Package fielderr is the one error type every config section returns, so
// the loader can prefix the section's path and point at the YAML line.
package fielderr

import "net"

// Error says which field of a section is wrong and why. Field is a dotted
// path relative to the section ("limits.max_bytes").
type Error struct {
	Field string
	Msg   string
}

// New returns an *Error for field.
func New(field, msg string) error { return &Error{Field: field, Msg: msg} }

func (e *Error) Error() string { return e.Field + ": " + e.Msg }

// HostPort checks that s is HOST:PORT with a port, for address fields.
func HostPort(field, s string) error {
	_, port, err := net.SplitHostPort(s)
	switch {
	case err != nil:
		return New(field, err.Error())
	case port == "":
		return New(field, "missing port in address "+s)
	}
	return nil
}
