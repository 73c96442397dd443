// Command stories is a story-publishing MCP server whose write tools are
// safe to call twice. Its caller is a model; each story is announced on a
// social network once.
//
//	go run ./examples/stories -demo                 # a scripted client: lost answers, retries, a report storm
//	go run ./examples/stories                       # stdio, on SQLite (idemkit-stories.db in the current folder)
//	go run ./examples/stories -http 127.0.0.1:8080 -user TOKEN=alice -user OTHER=bob
//	go run -tags postgres ./examples/stories -store postgres://...   # PostgreSQL; -tags dynamodb, firestore or allstores for the others
//
// Its tools, each keyed by arguments the model already has:
//   - publish_story(slug, title, body): replace keyed by slug. A republish
//     replaces the title and body and keeps revisions, reproductions and
//     checks. The announcement post goes out once per story: its marker
//     commits with the story and is claimed before posting (package
//     sideeffect), so parallel publishes and retries post once.
//   - report_reproduction(slug, handle, note?): one per (slug, handle); the
//     count is the size of the set, and the author is notified once per new
//     reproducer.
//   - edit_story(slug, revision, body): keyed by slug, based on the
//     revision it names. An identical edit writes nothing; another body
//     adds a revision and notifies each reproducer once while the story is
//     at that revision, and is refused once it is past it, so a model's
//     retry with a reworded body adds nothing.
//   - report_check(slug, handle, result): one result per handle, replaced.
//   - get_story(slug), read-only: content, counts, revisions, posts.
//   - get_operation: for callers that send an op_id (optional on every
//     write tool), whether it committed.
//
// Posts go to a small social service on loopback: started in the process,
// or the one at -social URL. Over HTTP each bearer token's user has stories
// and op ids of their own. Logs go to stderr; SIGINT or SIGTERM answers the
// calls in progress, closes the store and exits with status 0.
package main

import (
	"errors"
	"io"
	"os"
	"strings"

	"github.com/idemkit/sdk/examples/internal/exserve"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command: it returns the exit status, so that the deferred
// closes run before the process exits.
func run(args []string, stdout, stderr io.Writer) int {
	var f exserve.Flags
	fs := f.FlagSet("stories", stderr, "sqlite:idemkit-stories.db",
		"stories -demo",
		"stories -http 127.0.0.1:8080 -user TOKEN=alice -user OTHER=bob",
		"stories -store postgres://localhost/stories   # stdio, on PostgreSQL: a build with -tags postgres")
	social := fs.String("social", "", "post to the social service at this loopback URL (default: one started in this process)")
	c, status := f.Start(fs, args, func() error { return checkSocial(f.Demo, *social) })
	if c == nil {
		return status
	}
	defer c.Close()
	log := c.Log

	var sv *Social
	if *social == "" {
		var url string
		var err error
		if sv, url, err = startSocial(c.Ctx); err != nil {
			log.Error("starting the social service", "err", err)
			return 1
		}
		*social = url
		// Logged without its scheme: the first URL a server logs is its
		// MCP endpoint.
		log.Info("social service started", "addr", strings.TrimPrefix(url, "http://"))
	}
	a := newApp(c.Store, newPoster(*social), log, f.TTL, f.MaxStoredBytes)

	if f.Demo {
		if err := runDemo(c.Ctx, a, sv, stdout); err != nil {
			log.Error("demo", "err", err)
			return 1
		}
		return 0
	}
	// Posts a crash or a failed post left pending go out now; a claim
	// whose outcome is unknown is settled by asking the social service.
	if rep, err := a.effects.Recover(c.Ctx, a.social.post, a.social.reconcile); err != nil {
		log.Warn("posting what earlier runs left pending", "err", err)
	} else if len(rep.Posted)+len(rep.Unknown)+len(rep.Failed) > 0 {
		log.Info("posts left by earlier runs", "posted", len(rep.Posted), "unknown", len(rep.Unknown), "failed", len(rep.Failed))
	}
	return c.Exit(c.Run(a.server()))
}

// checkSocial refuses a -social that cannot work, before anything is
// opened.
func checkSocial(demo bool, social string) error {
	switch {
	case social == "":
		return nil
	case demo:
		return errors.New("-demo counts the posts of its own social service: no -social")
	}
	return checkLoopback(social)
}
