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
// a message naming the option, on every function that takes options;
// before, a non-positive TTL or BusyAfter and a nil function silently
// meant the default.
func TestOptionsWithUnusableValuesPanic(t *testing.T) {
	cases := []struct {
		name string
		opt  idem.Option
	}{
		{"TTL", idem.TTL(0)},
		{"TTL", idem.TTL(-time.Hour)},
		{"BusyAfter", idem.BusyAfter(0)},
		{"BusyAfter", idem.BusyAfter(-time.Second)},
		{"RecordKeys", idem.RecordKeys()},
		{"RecordKeys", idem.RecordKeys("slug", "")},
		{"Scope", idem.Scope(nil)},
		{"Clock", idem.Clock(nil)},
		{"Logger", idem.Logger(nil)},
		{"Observe", idem.Observe(nil)},
		{"TracerProvider", idem.TracerProvider(nil)},
		{"MeterProvider", idem.MeterProvider(nil)},
	}
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
		"RegisterStatusTool": func(o idem.Option) {
			srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v0"}, nil)
			idem.RegisterStatusTool(srv, memory.New(nil), o)
		},
	}
	for _, c := range cases {
		for fn, reg := range register {
			t.Run(fn+"/"+c.name, func(t *testing.T) {
				msg := panicOf(func() { reg(c.opt) })
				if !strings.Contains(msg, c.name) {
					t.Errorf("panic %q, want one naming %s", msg, c.name)
				}
			})
		}
	}
	// Usable values register.
	for fn, reg := range register {
		if msg := panicOf(func() {
			reg(idem.TTL(time.Minute))
			reg(idem.BusyAfter(time.Second))
			reg(idem.Clock(time.Now))
		}); msg != "" {
			t.Errorf("%s panicked on usable options: %s", fn, msg)
		}
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
