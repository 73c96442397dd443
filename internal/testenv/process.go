package testenv

import (
	"bufio"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// A Process is a command a test started, with what it wrote on stderr.
type Process struct {
	mu  sync.Mutex
	log strings.Builder
	url chan string // the first http:// URL on stderr
}

var urlInLog = regexp.MustCompile(`http://[^\s)"']+`)

// Start starts cmd, reading its stderr, and kills it when t ends; when t
// failed, its stderr goes to t's log.
func Start(t *testing.T, cmd *exec.Cmd) *Process {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Process{url: make(chan string, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.log.WriteString(line + "\n")
			p.mu.Unlock()
			if u := urlInLog.FindString(line); u != "" {
				select {
				case p.url <- u:
				default:
				}
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		<-done
		if t.Failed() {
			p.mu.Lock()
			t.Logf("%s stderr:\n%s", filepath.Base(cmd.Path), p.log.String())
			p.mu.Unlock()
		}
	})
	return p
}

// URL returns the first http:// URL the process printed on stderr, waiting
// for it up to wait; "" if none came. A second call returns "".
func (p *Process) URL(wait time.Duration) string {
	select {
	case u := <-p.url:
		return u
	case <-time.After(wait):
		return ""
	}
}
