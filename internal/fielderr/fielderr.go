// Package fielderr is the one error type every config section returns, so
// the loader can prefix the section's path and point at the YAML line.
package fielderr

// Error says which field of a section is wrong and why. Field is a dotted
// path relative to the section ("limits.max_bytes").
type Error struct {
	Field string
	Msg   string
}

// New returns an *Error for field.
func New(field, msg string) error { return &Error{Field: field, Msg: msg} }

func (e *Error) Error() string { return e.Field + ": " + e.Msg }
