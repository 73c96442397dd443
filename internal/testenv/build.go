package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Build builds the packages of pkgs (the binary's path -> the package's
// path, relative to the test's directory) at once, with the go command on
// PATH (go test puts its own first). The error names each package that
// did not build, with the compiler's output.
func Build(pkgs map[string]string) error {
	errs := make(chan error, len(pkgs))
	for out, pkg := range pkgs {
		go func() {
			b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput()
			if err != nil {
				err = fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
			}
			errs <- err
		}()
	}
	var all []error
	for range pkgs {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// A Binary is a command the tests run as a process of its own, built once
// per test process on first use. Its TestMain calls Remove when the tests
// are done.
type Binary struct {
	Pkg string // the package to build, relative to the test's directory

	once sync.Once
	path string
	err  error
}

// Path builds the command on the first call and returns its path; a
// failed build fails t, on every call.
func (b *Binary) Path(t testing.TB) string {
	t.Helper()
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "idemkit-bin-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, filepath.Base(b.Pkg))
		if b.Pkg == "." {
			wd, _ := os.Getwd()
			b.path = filepath.Join(dir, filepath.Base(wd))
		}
		b.err = Build(map[string]string{b.path: b.Pkg})
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// Remove deletes the binary, if it was built.
func (b *Binary) Remove() {
	if b.path != "" {
		os.RemoveAll(filepath.Dir(b.path))
	}
}
