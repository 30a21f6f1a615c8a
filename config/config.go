// Package config reads kproxy.yaml: it composes the sections each package
// owns, rejects unknown fields, fills defaults and reports the first
// problem with its field path and line.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"

	"gopkg.in/yaml.v3"

	"github.com/kproxy/kproxy/admin"
	"github.com/kproxy/kproxy/audit"
	"github.com/kproxy/kproxy/cluster"
	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/internal/fielderr"
	"github.com/kproxy/kproxy/logging"
	"github.com/kproxy/kproxy/policy"
	"github.com/kproxy/kproxy/proxy"
	"github.com/kproxy/kproxy/sasl"
	"github.com/kproxy/kproxy/telemetry"
	"github.com/kproxy/kproxy/tlsconf"
	"github.com/kproxy/kproxy/tracing"
)

// File is the whole of kproxy.yaml.
type File struct {
	Proxy     proxy.Config     `yaml:"proxy"`
	Framing   framing.Config   `yaml:"framing"`
	Correlate correlate.Config `yaml:"correlate"`
	Admin     admin.Config     `yaml:"admin"`
	Log       logging.Config   `yaml:"log"`
	Tracing   tracing.Config   `yaml:"tracing"`
	Policies  policy.Config    `yaml:"policies"`
	TLS       tlsconf.Config   `yaml:"tls"`
	Cluster   cluster.Config   `yaml:"cluster"`
	SASL      sasl.Config      `yaml:"sasl"`
	Audit     audit.Config     `yaml:"audit"`
	Telemetry telemetry.Config `yaml:"telemetry"`
}

// Defaults is the configuration of an empty file.
func Defaults() File {
	return File{
		Proxy:     proxy.Defaults(),
		Framing:   framing.Defaults(),
		Correlate: correlate.Defaults(),
		Admin:     admin.Defaults(),
		Log:       logging.Defaults(),
		Tracing:   tracing.Defaults(),
		Policies:  policy.Defaults(),
		TLS:       tlsconf.Defaults(),
		Cluster:   cluster.Defaults(),
		SASL:      sasl.Defaults(),
		Audit:     audit.Defaults(),
		Telemetry: telemetry.Defaults(),
	}
}

// Error is a config problem at a field path ("proxy.listen") and, when the
// field is in the file, a line.
type Error struct {
	File  string
	Line  int
	Field string
	Msg   string
}

func (e *Error) Error() string {
	loc := e.File
	if loc == "" {
		loc = "config"
	}
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", loc, e.Line)
	}
	if e.Field == "" {
		return loc + ": " + e.Msg
	}
	return loc + ": " + e.Field + ": " + e.Msg
}

// Load reads path over the defaults. It does not validate: flags may still
// override fields, so call Validate after them.
func Load(path string) (File, *yaml.Node, error) {
	f := Defaults()
	data, err := os.ReadFile(path)
	if err != nil {
		return f, nil, err
	}
	f, root, err := Parse(data)
	if err != nil {
		var ce *Error
		if errors.As(err, &ce) {
			ce.File = path
		}
	}
	return f, root, err
}

// Parse decodes YAML over the defaults, rejecting unknown fields.
func Parse(data []byte) (File, *yaml.Node, error) {
	f := Defaults()
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return f, nil, yamlError(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && err.Error() != "EOF" {
		return f, nil, yamlError(err)
	}
	return f, &root, nil
}

// Validate checks every section and the rules that span sections. root,
// when not nil, is the parsed file, used to find the line of a bad field.
func (f File) Validate(file string, root *yaml.Node) error {
	sections := []struct {
		name string
		err  error
	}{
		{"proxy", f.Proxy.Validate()},
		{"framing", f.Framing.Validate()},
		{"correlate", f.Correlate.Validate()},
		{"admin", f.Admin.Validate()},
		{"log", f.Log.Validate()},
		{"tracing", f.Tracing.Validate()},
		{"policies", f.Policies.Validate()},
		{"tls", f.TLS.Validate()},
		{"cluster", f.Cluster.Validate(f.Proxy.Listen)},
		{"sasl", f.SASL.Validate()},
		{"audit", f.Audit.Validate()},
		{"telemetry", f.Telemetry.Validate()},
	}
	for _, s := range sections {
		var fe *fielderr.Error
		if errors.As(s.err, &fe) {
			return at(file, root, s.name+"."+fe.Field, fe.Msg)
		}
		if s.err != nil {
			return &Error{File: file, Field: s.name, Msg: s.err.Error()}
		}
	}
	need := max(f.Framing.MaxRequestBytes, f.Framing.MaxResponseBytes) + framing.SizeLen
	if f.Proxy.MaxUnreadBytes < need {
		return at(file, root, "proxy.max_unread_bytes",
			fmt.Sprintf("must be at least %d, to hold one maximum-size frame (framing.max_request_bytes / max_response_bytes + 4)", need))
	}
	if f.Proxy.MaxBufferedBytes != 0 && f.Proxy.MaxBufferedBytes < need {
		return at(file, root, "proxy.max_buffered_bytes",
			fmt.Sprintf("must be 0 (derived from the memory limit) or at least %d, to hold one maximum-size frame (framing.max_request_bytes / max_response_bytes + 4)", need))
	}
	if samePort(f.Admin.Listen, f.Proxy.Listen) {
		return at(file, root, "admin.listen", "is on proxy.listen's port: both cannot be bound")
	}
	if _, port, err := net.SplitHostPort(f.Admin.Listen); err == nil {
		if p, err := strconv.Atoi(port); err == nil && f.Cluster.Serves(p) {
			return at(file, root, "cluster.node_port_base",
				fmt.Sprintf("node ports %d-%d include admin.listen's port %d", f.Cluster.NodePortBase,
					f.Cluster.NodePortBase+int(f.Cluster.NodeIDs.Max-f.Cluster.NodeIDs.Min), p))
		}
	}
	return nil
}

// samePort reports whether two listen addresses would take the same port:
// the same port on the same host, or on a host that binds every interface.
func samePort(a, b string) bool {
	ah, ap, err1 := net.SplitHostPort(a)
	bh, bp, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil || ap != bp || ap == "0" {
		return false
	}
	any := func(h string) bool { ip := net.ParseIP(h); return h == "" || ip != nil && ip.IsUnspecified() }
	return ah == bh || any(ah) || any(bh)
}
