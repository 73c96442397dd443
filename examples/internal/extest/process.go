package extest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A Process is an example's command serving streamable HTTP as a process
// of its own, started by [StartHTTP], with what it logged on stderr.
type Process struct {
	Cmd *exec.Cmd
	URL string // the endpoint URL it logged

	done chan struct{} // closed once it exited and its stderr was read
	err  error         // cmd.Wait's answer, once done

	mu  sync.Mutex
	log strings.Builder
}

// urlLine is the line an example logs once it serves HTTP, in the log
// format they share.
var urlLine = regexp.MustCompile(`msg="MCP over streamable HTTP" .*url=(http://\S+)`)

// StartHTTP starts cmd, an example's command serving HTTP, and waits up
// to 30 s for the endpoint URL it logs; it fails t when none comes, or
// when the process exits first. When t ends, the process is killed and
// waited for (up to 10 s), and, if t failed, what it logged goes to t's
// log.
func StartHTTP(t *testing.T, cmd *exec.Cmd) *Process {
	t.Helper()
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Process{Cmd: cmd, done: make(chan struct{})}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			p.mu.Lock()
			p.log.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if m := urlLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case urls <- m[1]:
				default:
				}
			}
		}
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			t.Errorf("pid %d did not exit within 10 s of SIGKILL", cmd.Process.Pid)
		}
		if t.Failed() {
			t.Logf("%s pid %d stderr:\n%s", filepath.Base(cmd.Path), cmd.Process.Pid, p.Log())
		}
	})
	select {
	case p.URL = <-urls:
	case <-p.done:
		t.Fatalf("%s exited before serving: %v", filepath.Base(cmd.Path), p.err)
	case <-time.After(30 * time.Second):
		t.Fatal("no URL logged within 30 s")
	}
	return p
}

// Log returns what the process logged on stderr so far: all of it once it
// exited.
func (p *Process) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// Err returns the answer of the process's Wait once it exited (nil for
// status 0), and nil before.
func (p *Process) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Stop sends sig and waits up to within for the process to exit. It
// returns an error when the process is still running then, when it
// exited with a status other than 0, or when its log says its shutdown
// timed out ("still running after"): a clean exit answers the calls in
// progress without waiting out the shutdown timeout (a slow machine may
// take longer than the timeout to exit, so time alone does not tell).
func (p *Process) Stop(sig os.Signal, within time.Duration) error {
	if err := p.Cmd.Process.Signal(sig); err != nil {
		return err
	}
	select {
	case <-p.done:
	case <-time.After(within):
		return fmt.Errorf("still running %v after %v", within, sig)
	}
	if p.err != nil {
		return fmt.Errorf("exit after %v: %w", sig, p.err)
	}
	for line := range strings.Lines(p.Log()) {
		if strings.Contains(line, "still running after") {
			return fmt.Errorf("the shutdown timed out: %s", strings.TrimSpace(line))
		}
	}
	return nil
}

// Kill sends SIGKILL and waits up to 10 s for the process to exit.
func (p *Process) Kill() error {
	if err := p.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("still running 10 s after SIGKILL")
	}
}
