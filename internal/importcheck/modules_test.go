package importcheck

import (
	"encoding/json"
	"io/fs"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// heavy are the module paths (or their prefixes) that the root module must
// not require: the DynamoDB and Firestore stores' SDKs and the interop
// suite's mcp-go live in modules of their own, so that a user of idem and
// the root module's stores does not carry them (docs/backend.md). With graph
// pruning, a user's build holds the root module's requirements, not those
// of the modules beside it.
var heavy = []string{
	"github.com/aws",
	"cloud.google.com/go/firestore",
	"google.golang.org/api",
	"google.golang.org/genproto",
	"google.golang.org/grpc",
	"github.com/mark3labs/mcp-go",
}

func TestRootModuleRequiresNoCloudSDK(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed: %v", err)
	}
	root, _ := module(t, goCmd)
	var mod struct{ Require []struct{ Path string } }
	if err := json.Unmarshal([]byte(run(t, root, goCmd, "mod", "edit", "-json")), &mod); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, r := range mod.Require {
		paths = append(paths, r.Path)
	}
	if !slices.Contains(paths, "github.com/jackc/pgx/v5") {
		t.Fatalf("go.mod does not require pgx, which store/postgres needs: %v", paths)
	}
	for _, p := range paths {
		for _, h := range heavy {
			if p == h || strings.HasPrefix(p, h+"/") {
				t.Errorf("the root module requires %s", p)
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
