package proxy

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/kproxy/kproxy/"

// goList runs go list -f format on pkgs and returns one line per package.
func goList(t *testing.T, format string, pkgs ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-f", format}, pkgs...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// The drivers move bytes: every Kafka decision is the session's, so no
// driver (nor the connection core under them) imports the rule engine, the
// tracer or SASL; and the two drivers share only the core, never each
// other's code.
func TestDriverBoundaries(t *testing.T) {
	kafka := []string{"policy", "tracing", "sasl"}
	for _, line := range goList(t, "{{.ImportPath}} {{join .Imports \" \"}}", "./core", "./loop", "./stream") {
		fields := strings.Fields(line)
		for _, imp := range fields[1:] {
			for _, k := range kafka {
				if imp == module+k {
					t.Errorf("%s imports %s: a driver asks the session (relay) instead", fields[0], imp)
				}
			}
		}
	}
	for pkg, banned := range map[string][]string{
		"./loop":   {module + "proxy/stream"},
		"./stream": {module + "proxy/loop", "github.com/cloudwego/netpoll"},
		"./core":   {module + "proxy/loop", module + "proxy/stream", "github.com/cloudwego/netpoll"},
	} {
		deps := goList(t, "{{join .Deps \"\\n\"}}", pkg)
		for _, d := range deps {
			for _, b := range banned {
				if d == b {
					t.Errorf("%s depends on %s", pkg, b)
				}
			}
		}
	}
}
