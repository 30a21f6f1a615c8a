package harness

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Proc is an external process started for a test. It runs in its own
// process group, dies with the test binary (SIGKILL through the parent
// death signal, even if the binary is killed by a timeout), and is killed
// with its whole group in t.Cleanup if it is still running then. Its
// stdout and stderr go to a log file whose tail is printed when the test
// fails.
type Proc struct {
	Name    string
	LogPath string

	cmd    *exec.Cmd
	done   chan struct{}
	err    error // from Wait, set before done closes
	cancel context.CancelFunc
}

// Start starts bin with args, env (see Env) and working directory dir
// ("" for the test's own).
func Start(t testing.TB, name, bin string, args, env []string, dir string) *Proc {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close() // the child has its own descriptor

	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// On cancel, kill the whole group, not only the leader.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("starting %s (%s): %v", name, bin, err)
	}
	p := &Proc{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{}), cancel: cancel}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Logf("started %s (pid %d): %s %s", name, cmd.Process.Pid, bin, strings.Join(args, " "))
	t.Cleanup(func() {
		p.cancel()
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			t.Errorf("%s (pid %d) did not die after SIGKILL", name, cmd.Process.Pid)
		}
		if t.Failed() {
			t.Logf("last lines of %s's output:\n%s", name, p.Tail(60))
		}
	})
	return p
}

// Pid is the process id (and process group id).
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Exited is closed when the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.done }

// ExitErr is the error from waiting for the process (nil for exit 0);
// only meaningful once Exited is closed.
func (p *Proc) ExitErr() error {
	select {
	case <-p.done:
		return p.err
	default:
		return errors.New("still running")
	}
}

// Stop sends sig to the process and waits up to timeout for it to exit,
// returning its exit error (nil for exit status 0). If it does not exit in
// time its group is killed and Stop reports that.
func (p *Proc) Stop(sig syscall.Signal, timeout time.Duration) error {
	select {
	case <-p.done:
		return p.err
	default:
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		p.cancel()
		<-p.done
		return errors.New(p.Name + " did not exit within " + timeout.String() + " of " + sig.String() + "; killed")
	}
}

// Output is everything the process has written so far.
func (p *Proc) Output() string {
	b, _ := os.ReadFile(p.LogPath)
	return string(b)
}

// Tail is the last n lines of the output.
func (p *Proc) Tail(n int) string {
	b := bytes.TrimRight([]byte(p.Output()), "\n")
	lines := bytes.Split(b, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
