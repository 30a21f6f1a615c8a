package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/kproxy/kproxy/inject"
)

// The command writes the golden manifest for the golden input, from a file
// and from standard input, and says what it needs when given nothing.
func TestRun(t *testing.T) {
	want, err := os.ReadFile("../../testdata/out.yaml")
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.ReadFile("../../testdata/in.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"../../testdata/in.yaml", "-"} {
		var out bytes.Buffer
		if err := run(file, "", "", "", inject.Defaults(), bytes.NewReader(in), &out); err != nil {
			t.Fatalf("-f %s: %v", file, err)
		}
		if !bytes.Equal(out.Bytes(), want) {
			t.Errorf("-f %s: output differs from testdata/out.yaml", file)
		}
	}
	if err := run("", "", "", "", inject.Defaults(), nil, nil); err == nil || !strings.Contains(err.Error(), "-f MANIFEST") {
		t.Errorf("no arguments: %v", err)
	}
	if err := run("", "127.0.0.1:0", "", "", inject.Defaults(), nil, nil); err == nil || !strings.Contains(err.Error(), "--tls-cert") {
		t.Errorf("--serve without TLS: %v", err)
	}
}
