package idem_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/sdk/idem"
	"github.com/idemkit/sdk/store/memory"
)

// An option given a value it cannot use makes the registration panic with
// a message naming the option, on every function that takes options; so do
// negative durations in a Guard's Options, naming the field.
func TestOptionsWithUnusableValuesPanic(t *testing.T) {
	h := func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, any, error) {
		return nil, nil, nil
	}
	register := map[string]func(idem.Option){
		"AddTool": func(o idem.Option) {
			srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
			idem.AddTool(srv, &mcp.Tool{Name: "add_note"}, memory.New(nil), h, idem.OpID(), o)
		},
		"Tool": func(o idem.Option) {
			idem.Tool(&mcp.Tool{Name: "add_note"}, memory.New(nil), h, idem.OpID(), o)
		},
		"Middleware": func(o idem.Option) {
			idem.New(memory.New(nil), nil).Middleware(idem.Tools{"add_note": {o}})
		},
	}
	for _, o := range []idem.Option{idem.RecordKeys(), idem.RecordKeys("slug", "")} {
		for fn, reg := range register {
			if msg := panicOf(func() { reg(o) }); !strings.Contains(msg, "RecordKeys") {
				t.Errorf("%s: panic %q, want one naming RecordKeys", fn, msg)
			}
		}
	}
	for name, opts := range map[string]idem.Options{
		"TTL":       {TTL: -time.Hour},
		"BusyAfter": {BusyAfter: -time.Second},
		"Lease":     {Lease: -time.Second},
	} {
		if msg := panicOf(func() { idem.New(memory.New(nil), &opts) }); !strings.Contains(msg, name) {
			t.Errorf("New with a negative %s: panic %q, want one naming it", name, msg)
		}
	}
	// Usable values register.
	if msg := panicOf(func() {
		g := idem.New(memory.New(nil), &idem.Options{TTL: time.Minute, BusyAfter: time.Second, Now: time.Now})
		idem.Tool(&mcp.Tool{Name: "add_note"}, g, h, idem.OpID())
	}); msg != "" {
		t.Errorf("usable options panicked: %s", msg)
	}
}

func panicOf(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

// ForApps publishes who the tool is for where the audit reads it, and is
// refused on a tool that is not op-id-only.
func TestForApps(t *testing.T) {
	h := func(ctx context.Context, tx idem.Tx, req *mcp.CallToolRequest, in Note) (*mcp.CallToolResult, any, error) {
		return nil, nil, nil
	}
	tool, _ := idem.Tool(&mcp.Tool{Name: "add_note", Description: "Add a note."}, memory.New(nil), h, idem.RequireOpID(), idem.ForApps())
	if tool.Meta[idem.MetaCallers] != "apps" {
		t.Errorf("_meta %v, want %s: apps", tool.Meta, idem.MetaCallers)
	}
	if !strings.HasPrefix(tool.Description, "For apps, not models. Add a note.") {
		t.Errorf("description %q, want it to start by saying it is for apps", tool.Description)
	}
	for name, opts := range map[string][]idem.Option{
		"without RequireOpID": {idem.OpID(), idem.ForApps()},
		"with RecordKeys":     {idem.RequireOpID(), idem.RecordKeys("text"), idem.ForApps()},
	} {
		if msg := panicOf(func() { idem.Tool(&mcp.Tool{Name: "add_note"}, memory.New(nil), h, opts...) }); !strings.Contains(msg, "ForApps") {
			t.Errorf("%s: panic %q, want one naming ForApps", name, msg)
		}
	}
}
