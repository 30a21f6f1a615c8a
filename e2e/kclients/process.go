package kclients

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Process is a Driver that runs a driver program following
// e2e/clients/CONTRACT.md, once per step.
type Process struct {
	name        string
	argv        []string // command and fixed leading arguments
	dir         string
	env         []string
	tmp         string
	unsupported map[string]string
}

// NewProcess asks the driver program argv for its name and features.
// dir is its working directory, env its environment, tmp a folder for the
// record files.
func NewProcess(ctx context.Context, argv []string, dir string, env []string, tmp string) (*Process, error) {
	p := &Process{argv: argv, dir: dir, env: env, tmp: tmp}
	out, err := p.run(ctx, "features", nil)
	if err != nil {
		return nil, err
	}
	var f struct {
		Name        string            `json:"name"`
		Unsupported map[string]string `json:"unsupported"`
	}
	if err := json.Unmarshal([]byte(out), &f); err != nil || f.Name == "" {
		return nil, fmt.Errorf("%s features: want a JSON object with a name, got %q (%v)", argv[0], out, err)
	}
	p.name, p.unsupported = f.Name, f.Unsupported
	return p, nil
}

func (p *Process) Name() string                 { return p.name }
func (p *Process) Unsupported(f Feature) string { return p.unsupported[string(f)] }

func (p *Process) Produce(ctx context.Context, o ProduceOpts, recs []Record) error {
	in, err := p.writeRecords("produce", recs)
	if err != nil {
		return err
	}
	args := []string{"--topic", o.Topic, "--input", in, "--acks", o.Acks, "--compression", o.Compression}
	if o.Idempotent {
		args = append(args, "--idempotent")
	}
	if o.Pace > 0 {
		args = append(args, "--pace-ms", strconv.FormatInt(o.Pace.Milliseconds(), 10))
	}
	if o.Faults {
		args = append(args, "--faults")
	}
	if o.TransactionalID != "" {
		ab, err := p.writeRecords("aborted", o.Aborted)
		if err != nil {
			return err
		}
		args = append(args, "--transactional-id", o.TransactionalID, "--aborted", ab)
	}
	_, err = p.run(ctx, "produce", append(conn(o.Conn), args...))
	return err
}

func (p *Process) Consume(ctx context.Context, o ConsumeOpts) ([]Delivered, error) {
	out, err := os.CreateTemp(p.tmp, "consumed-*.tsv")
	if err != nil {
		return nil, err
	}
	out.Close()
	args := []string{"--topic", o.Topic, "--group", o.Group, "--count", strconv.Itoa(o.Count),
		"--timeout-ms", strconv.FormatInt(o.Timeout.Milliseconds(), 10), "--protocol", o.Protocol,
		"--members", strconv.Itoa(max(o.Members, 1)), "--output", out.Name()}
	if o.ReadCommitted {
		args = append(args, "--read-committed")
	}
	if o.Faults {
		args = append(args, "--faults")
	}
	// The program enforces the timeout; the context is a backstop.
	ctx, cancel := context.WithTimeout(ctx, o.Timeout+30*time.Second)
	defer cancel()
	_, runErr := p.run(ctx, "consume", append(conn(o.Conn), args...))
	got, readErr := readDelivered(out.Name())
	return got, errors.Join(runErr, readErr)
}

func (p *Process) Admin(ctx context.Context, o AdminOpts) error {
	_, err := p.run(ctx, "admin", append(conn(o.Conn), "--topic", o.Topic, "--partitions", strconv.Itoa(o.Partitions)))
	return err
}

func (p *Process) CreateTopic(ctx context.Context, c Conn, topic string, partitions int) error {
	_, err := p.run(ctx, "create-topic", append(conn(c), "--topic", topic, "--partitions", strconv.Itoa(partitions)))
	return err
}

func (p *Process) DeleteTopic(ctx context.Context, c Conn, topic string) error {
	_, err := p.run(ctx, "delete-topic", append(conn(c), "--topic", topic))
	return err
}

// Perf runs the driver's perf command (only the Java driver has one).
func (p *Process) Perf(ctx context.Context, c Conn, topic string, n, size int) error {
	_, err := p.run(ctx, "perf", append(conn(c), "--topic", topic, "--count", strconv.Itoa(n), "--size", strconv.Itoa(size)))
	return err
}

func conn(c Conn) []string {
	a := []string{"--bootstrap", c.Bootstrap}
	if c.SASL.Mechanism != "" {
		a = append(a, "--sasl-mechanism", c.SASL.Mechanism, "--sasl-user", c.SASL.User, "--sasl-password", c.SASL.Password)
	}
	if c.TLS.On() {
		a = append(a, "--tls-ca", c.TLS.CAFile)
		if c.TLS.CertFile != "" {
			a = append(a, "--tls-cert", c.TLS.CertFile, "--tls-key", c.TLS.KeyFile)
		}
	}
	return a
}

// run runs one command and returns its stdout; a failure carries the
// tail of stderr.
func (p *Process) run(ctx context.Context, command string, args []string) (string, error) {
	argv := append(append(append([]string{}, p.argv...), command), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = p.dir, p.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %v: %s", filepath.Base(p.argv[len(p.argv)-1]), command, err, tail(stderr.String(), 15))
	}
	return stdout.String(), nil
}

func (p *Process) writeRecords(kind string, recs []Record) (string, error) {
	f, err := os.CreateTemp(p.tmp, kind+"-*.tsv")
	if err != nil {
		return "", err
	}
	w := bufio.NewWriter(f)
	for _, r := range recs {
		fmt.Fprintf(w, "%s\t%s\n", r.Key, r.Value)
	}
	if err := errors.Join(w.Flush(), f.Close()); err != nil {
		return "", err
	}
	return f.Name(), nil
}

func readDelivered(path string) ([]Delivered, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []Delivered
	for i, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.SplitN(line, "\t", 5)
		if len(f) != 5 {
			return out, fmt.Errorf("%s line %d: want member<TAB>partition<TAB>key<TAB>value<TAB>traceparent, got %q", path, i+1, line)
		}
		m, err1 := strconv.Atoi(f[0])
		pt, err2 := strconv.ParseInt(f[1], 10, 32)
		if err := errors.Join(err1, err2); err != nil {
			return out, fmt.Errorf("%s line %d: %v", path, i+1, err)
		}
		out = append(out, Delivered{Member: m, Partition: int32(pt), Key: f[2], Value: f[3], Traceparent: f[4]})
	}
	return out, nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
