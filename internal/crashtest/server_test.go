package crashtest_test

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemkit/sdk/internal/crashtest"
	"github.com/idemkit/sdk/internal/testenv"
)

// crashServer is command crashserver, built once per test run (TestMain
// removes it) without the race detector even when the test has it: a
// race-enabled server starts and runs several times slower, and the crash
// test is about the store, not about this process's memory.
var crashServer = &testenv.Binary{Pkg: "./crashserver"}

// serverBinary returns the command's path, building it on the first call.
func serverBinary(t *testing.T) string {
	t.Helper()
	return crashServer.Path(t)
}

func TestMain(m *testing.M) {
	code := m.Run()
	crashServer.Remove()
	os.Exit(code)
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
// listening socket ln. It may be called from any goroutine.
func startServer(t *testing.T, ln *os.File, args ...string) (*process, error) {
	cmd := exec.Command(crashServer.Path(t), append([]string{"-listen-fd", "3"}, args...)...)
	cmd.ExtraFiles = []*os.File{ln}
	cmd.SysProcAttr = serverAttr()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
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
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			cmd.Process.Kill()
			<-p.exited
		}
	})
	return p, nil
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
