package crashtest_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemkit/sdk/internal/crashtest"
)

// serveEnv, set to 1, makes the test binary the crash server: the server
// runs in a process of its own, built from the same code as command
// crashserver, with no separate build.
const serveEnv = "IDEMKIT_CRASHTEST_SERVE"

func TestMain(m *testing.M) {
	if os.Getenv(serveEnv) == "1" {
		if err := crashtest.Serve(os.Args[1:], os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "crashserver:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// process is one crashserver process.
type process struct {
	cmd    *exec.Cmd
	ready  chan struct{} // closed once it printed its ready line
	exited chan struct{} // closed once it exited and its output was read

	// Set before exited is closed.
	killedAt string   // the point it printed before killing itself
	tail     []string // its last lines on stderr
	waitErr  error
}

// startServer starts crashserver with args, serving on the inherited
// listening socket ln.
func startServer(t *testing.T, ln *os.File, args ...string) *process {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, append([]string{"-listen-fd", "3"}, args...)...)
	cmd.Env = append(os.Environ(), serveEnv+"=1")
	cmd.ExtraFiles = []*os.File{ln}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, ready: make(chan struct{}), exited: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stderr)
		ready := false
		for sc.Scan() {
			line := sc.Text()
			switch {
			case !ready && strings.HasPrefix(line, crashtest.ReadyLine):
				ready = true
				close(p.ready)
			case strings.HasPrefix(line, crashtest.KillLine):
				p.killedAt = strings.TrimPrefix(line, crashtest.KillLine)
			}
			if len(p.tail) == 20 {
				p.tail = p.tail[1:]
			}
			p.tail = append(p.tail, line)
		}
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p
}

// killedBySIGKILL reports whether the process ended by SIGKILL.
func (p *process) killedBySIGKILL() bool {
	var ee *exec.ExitError
	if !errors.As(p.waitErr, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// stop ends the process with SIGTERM (it has no call in progress) and
// reports whether it exited cleanly.
func (p *process) stop() error {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
		return errors.New("still running 20 s after SIGTERM")
	}
	if p.waitErr != nil {
		return errors.New(p.waitErr.Error() + ": " + strings.Join(p.tail, " | "))
	}
	return nil
}
