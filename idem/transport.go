package idem

import (
	"context"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
)

// Transport returns an http.RoundTripper over base (http.DefaultTransport
// when nil) that tells a [Guard] what a guarded call's requests came to.
// With [Options] HTTPEffects set, a guarded call that failed without
// saying [NotDone] is not done when no request it sent through the
// Transport can have acted: it sent none that changes state (any method
// but GET, HEAD and OPTIONS), or each one it sent was refused (a 4xx
// status but 408, 409, 425 and 429), or never reached the API (no
// connection was made for it). Otherwise, and for a request that failed
// once it had a connection (a timeout, a reset), the outcome is unknown.
// So a server whose tools' effects are HTTP requests wraps its client's
// transport once:
//
//	client := &http.Client{Transport: idem.Transport(nil)}
//
// and its handlers' failures need no NotDone. Outside a guarded call the
// Transport is base.
func Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{base: base}
}

type transport struct{ base http.RoundTripper }

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	tr, _ := req.Context().Value(effectTraceKey{}).(*effectTrace)
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		tr = nil // reads change nothing
	}
	if tr == nil {
		return t.base.RoundTrip(req)
	}
	var reached atomic.Bool // a connection was made for it: it may have been sent
	ctx := httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { reached.Store(true) },
	})
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	tr.record(reached.Load(), resp, err)
	return resp, err
}

type effectTraceKey struct{}

// An effectTrace is what a guarded call's requests that change state came
// to, as its Transport saw them.
type effectTrace struct {
	mu    sync.Mutex // guards acted
	acted bool       // some request may have acted
}

// record notes one request: whether it had a connection, and its answer.
func (tr *effectTrace) record(reached bool, resp *http.Response, err error) {
	refused := err == nil && resp.StatusCode >= 400 && resp.StatusCode < 500
	switch {
	case err == nil && refused:
		switch resp.StatusCode {
		case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooEarly, http.StatusTooManyRequests:
			refused = false // may have acted, or may act yet
		}
	case err != nil && !reached:
		refused = true // it never reached the API
	}
	if !refused {
		tr.mu.Lock()
		tr.acted = true
		tr.mu.Unlock()
	}
}

// mayHaveActed reports whether some request may have acted.
func (tr *effectTrace) mayHaveActed() bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.acted
}

// withEffectTrace returns ctx with a new trace, for a guarded call's
// handler.
func withEffectTrace(ctx context.Context) (context.Context, *effectTrace) {
	tr := &effectTrace{}
	return context.WithValue(ctx, effectTraceKey{}, tr), tr
}
