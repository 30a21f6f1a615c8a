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
