package importcheck

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// heavy are the module paths (or their prefixes) that the root module's
// graph must not hold: the DynamoDB and Firestore stores' SDKs and the
// interop suite's mcp-go live in modules of their own, so that a user of
// idem and the root module's stores does not carry them (docs/modules.md).
var heavy = []string{
	"github.com/aws",
	"cloud.google.com/go/firestore",
	"google.golang.org/api",
	"google.golang.org/genproto",
	"google.golang.org/grpc",
	"github.com/mark3labs/mcp-go",
}

func TestRootModuleCarriesNoCloudSDK(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed: %v", err)
	}
	root, _ := module(t, goCmd)
	// Without the workspace, as a user's build sees the module.
	cmd := exec.Command(goCmd, "list", "-m", "all")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list -m all: %v\n%s", err, out)
	}
	var paths []string
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) > 0 {
			paths = append(paths, f[0])
		}
	}
	if !slices.Contains(paths, "github.com/jackc/pgx/v5") {
		t.Fatalf("go list -m all does not list pgx, which store/postgres needs:\n%s", out)
	}
	for _, p := range paths {
		for _, h := range heavy {
			if p == h || strings.HasPrefix(p, h+"/") {
				t.Errorf("the root module's graph holds %s", p)
			}
		}
	}
}

// Every go.mod in the repository is a module of the workspace, so that
// scripts/test.sh, which tests the workspace's packages, tests it.
func TestWorkspaceUsesEveryModule(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed: %v", err)
	}
	root, _ := module(t, goCmd)
	var found []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && path != root && (name == "node_modules" || name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		if !d.IsDir() && name == "go.mod" {
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			found = append(found, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var work struct{ Use []struct{ DiskPath string } }
	if err := json.Unmarshal([]byte(run(t, root, goCmd, "work", "edit", "-json")), &work); err != nil {
		t.Fatal(err)
	}
	var used []string
	for _, u := range work.Use {
		used = append(used, filepath.ToSlash(filepath.Clean(u.DiskPath)))
	}
	slices.Sort(found)
	slices.Sort(used)
	if len(found) < 2 {
		t.Fatalf("found go.mod files in %v only", found)
	}
	if !slices.Equal(found, used) {
		t.Errorf("go.mod files in %v, go.work uses %v", found, used)
	}
}
