package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/kproxy/kproxy/inject"
)

// The command writes the golden manifests for the golden inputs, from a
// file and from standard input, and says what it needs when given nothing.
func TestRun(t *testing.T) {
	for _, golden := range []string{"", "cluster-"} { // broker-pod and client-pod shapes
		want, err := os.ReadFile("../../testdata/" + golden + "out.yaml")
		if err != nil {
			t.Fatal(err)
		}
		in, err := os.ReadFile("../../testdata/" + golden + "in.yaml")
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range []string{"../../testdata/" + golden + "in.yaml", "-"} {
			var out bytes.Buffer
			if err := run(file, "", "", "", inject.Defaults(), bytes.NewReader(in), &out); err != nil {
				t.Fatalf("-f %s: %v", file, err)
			}
			if !bytes.Equal(out.Bytes(), want) {
				t.Errorf("-f %s: output differs from testdata/%sout.yaml", file, golden)
			}
		}
	}
	if err := run("", "", "", "", inject.Defaults(), nil, nil); err == nil || !strings.Contains(err.Error(), "-f MANIFEST") {
		t.Errorf("no arguments: %v", err)
	}
	if err := run("", "127.0.0.1:0", "", "", inject.Defaults(), nil, nil); err == nil || !strings.Contains(err.Error(), "--tls-cert") {
		t.Errorf("--serve without TLS: %v", err)
	}
}

// A manifest whose client-pod SASL annotations are wrong is refused with
// an error naming the annotation, and nothing is written.
func TestRunBadSASL(t *testing.T) {
	const dep = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\n  annotations:\n    kproxy.io/inject: \"true\"\n" +
		"    kproxy.io/mode: cluster\n    kproxy.io/bootstrap: kafka:9092\n%s" +
		"spec:\n  selector: {}\n  template:\n    metadata:\n      labels: {app: x}\n    spec:\n      containers: []\n"
	for _, c := range []struct{ ann, want string }{
		{"    kproxy.io/sasl-mechanism: SCRAM-SHA-512\n", "-: document 1: Deployment: annotation kproxy.io/sasl-mechanism needs kproxy.io/sasl-secret"},
		{"    kproxy.io/sasl-secret: creds\n", "-: document 1: Deployment: annotation kproxy.io/sasl-secret needs kproxy.io/sasl-mechanism"},
		{"    kproxy.io/sasl-secret: creds\n    kproxy.io/sasl-mechanism: KERBEROS\n", `-: document 1: Deployment: annotation kproxy.io/sasl-mechanism="KERBEROS"`},
	} {
		var out bytes.Buffer
		in := strings.Replace(dep, "%s", c.ann, 1)
		if err := run("-", "", "", "", inject.Defaults(), strings.NewReader(in), &out); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err %v, want one with %q", c.ann, err, c.want)
		}
		if out.Len() > 0 {
			t.Errorf("%q: wrote %s", c.ann, out.Bytes())
		}
	}
	var out bytes.Buffer
	ok := strings.Replace(dep, "%s", "    kproxy.io/sasl-secret: creds\n    kproxy.io/sasl-mechanism: PLAIN\n", 1)
	if err := run("-", "", "", "", inject.Defaults(), strings.NewReader(ok), &out); err != nil || !strings.Contains(out.String(), "mechanism: PLAIN") {
		t.Errorf("PLAIN with a Secret: %v\n%s", err, out.Bytes())
	}
}
