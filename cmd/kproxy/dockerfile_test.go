package main

import (
	"bufio"
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kproxy/kproxy/config"
)

// dockerfile is the parts of the repository's Dockerfile the checks need.
type dockerfile struct {
	froms      []string // each stage's FROM line, in order
	buildRun   string   // the build stage's RUN that runs go build
	argDefault map[string]string
	user       string
	expose     []string
	entrypoint []string
	cmd        []string
	copies     []string // the final stage's COPY lines
}

// parseDockerfile reads the instructions this repository's Dockerfile
// uses, joining continued lines and skipping comments.
func parseDockerfile(t *testing.T, path string) dockerfile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := dockerfile{argDefault: map[string]string{}}
	var line string
	s := bufio.NewScanner(f)
	for s.Scan() {
		text := strings.TrimSpace(s.Text())
		if strings.HasPrefix(text, "#") || text == "" && line == "" {
			continue
		}
		if cont, ok := strings.CutSuffix(text, `\`); ok {
			line += cont + " "
			continue
		}
		line += text
		instr, rest, _ := strings.Cut(line, " ")
		line = ""
		jsonArgs := func() []string {
			var v []string
			if err := json.Unmarshal([]byte(rest), &v); err != nil {
				t.Fatalf("%s %s: want the JSON (exec) form: %v", instr, rest, err)
			}
			return v
		}
		switch strings.ToUpper(instr) {
		case "FROM":
			d.froms = append(d.froms, rest)
			d.copies = nil
		case "ARG":
			if k, v, ok := strings.Cut(rest, "="); ok {
				d.argDefault[k] = v
			}
		case "RUN":
			if strings.Contains(rest, "go build") {
				d.buildRun = rest
			}
		case "USER":
			d.user = rest
		case "EXPOSE":
			d.expose = strings.Fields(rest)
		case "ENTRYPOINT":
			d.entrypoint = jsonArgs()
		case "CMD":
			d.cmd = jsonArgs()
		case "COPY":
			d.copies = append(d.copies, rest)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return d
}

// The image's shape: a Go build stage, a static final base, a numeric
// non-root user, kproxy as the entrypoint running the config the image
// ships, and the ports that config listens on.
func TestDockerfileShape(t *testing.T) {
	root := filepath.Join("..", "..")
	d := parseDockerfile(t, filepath.Join(root, "Dockerfile"))
	if len(d.froms) != 2 || !strings.HasPrefix(d.froms[0], "golang:") || !strings.HasSuffix(d.froms[0], " AS build") {
		t.Fatalf("stages %q: want a golang:... AS build stage and a final one", d.froms)
	}
	if final := d.froms[1]; final != "scratch" && !strings.HasPrefix(final, "gcr.io/distroless/static") {
		t.Errorf("final stage FROM %s: want scratch or distroless static", final)
	}
	uid, _, _ := strings.Cut(d.user, ":")
	if uid == "" || strings.Trim(uid, "0123456789") != "" || uid == "0" {
		t.Errorf("USER %q: want a numeric non-root user", d.user)
	}
	if len(d.entrypoint) != 1 || filepath.Base(d.entrypoint[0]) != "kproxy" {
		t.Errorf("ENTRYPOINT %q: want the kproxy binary alone", d.entrypoint)
	}
	const cfgPath = "/etc/kproxy/kproxy.yaml"
	if strings.Join(d.cmd, " ") != "run --config "+cfgPath {
		t.Errorf("CMD %q: want run --config %s", d.cmd, cfgPath)
	}
	shipped := ""
	for _, c := range d.copies {
		if src, dst, _ := strings.Cut(c, " "); dst == cfgPath {
			shipped = src
		}
	}
	if shipped == "" {
		t.Fatalf("the final stage does not COPY a config to %s: %q", cfgPath, d.copies)
	}
	cfg, _, err := config.Load(filepath.Join(root, shipped))
	if err != nil {
		t.Fatalf("the shipped config %s: %v", shipped, err)
	}
	want := []string{portOf(t, cfg.Proxy.Listen), portOf(t, cfg.Admin.Listen)}
	if strings.Join(d.expose, " ") != strings.Join(want, " ") {
		t.Errorf("EXPOSE %q: the shipped config listens on ports %q", d.expose, want)
	}
}

func portOf(t *testing.T, addr string) string {
	t.Helper()
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		t.Fatalf("address %q has no port", addr)
	}
	if host := addr[:i]; host != "0.0.0.0" && host != "" {
		t.Errorf("%s listens on %s only; in a container it must listen on all interfaces", addr, host)
	}
	return addr[i+1:]
}

// The Dockerfile's own build step, run as written (with /out moved to a
// temporary directory), makes a static binary that reports the version it
// was stamped with.
func TestDockerfileBuildStep(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	d := parseDockerfile(t, filepath.Join(root, "Dockerfile"))
	if d.buildRun == "" {
		t.Fatal("no RUN ... go build in the Dockerfile")
	}
	for _, flag := range []string{"CGO_ENABLED=0", "-trimpath", "-X main.buildVersion=${VERSION}"} {
		if !strings.Contains(d.buildRun, flag) {
			t.Errorf("build step lacks %s: %s", flag, d.buildRun)
		}
	}
	if _, ok := d.argDefault["VERSION"]; !ok {
		t.Error("no ARG VERSION=... default for the build step")
	}
	out := t.TempDir()
	script := strings.ReplaceAll(d.buildRun, "/out/", out+"/")
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "VERSION=v9.8.7-dockerfile-test")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, b)
	}
	bin := filepath.Join(out, "kproxy")
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary asks for a dynamic loader (PT_INTERP); it would not start on scratch or distroless static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %q", libs)
	}
	got, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("kproxy version: %v\n%s", err, got)
	}
	if !strings.Contains(string(got), "v9.8.7-dockerfile-test") {
		t.Errorf("kproxy version printed %q, not the stamped version", got)
	}
}
