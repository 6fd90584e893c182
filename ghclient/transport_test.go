package ghclient

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/seq"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// An act's step whose time runs out while the client waits to send a
// request again (GitHub refused the first under its secondary limit):
// nothing more leaves, and the act's mark is this process's again, so the
// next step sends it instead of reading GitHub for an act never taken.
func TestLastCheckSendsNothingOnceTheStepsTimeRanOut(t *testing.T) {
	sent := 0
	rt := lastCheckTransport{base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent++
		return &http.Response{StatusCode: http.StatusForbidden, Header: http.Header{"Retry-After": {"60"}}, Body: http.NoBody, Request: r}, nil
	})}
	var marks seq.Marks
	mark := marks.New()
	ctx, cancel := context.WithCancel(context.Background())
	_, err := seq.Wakeup{}.Send(ctx, &marks, seq.Act{Mark: mark, Do: func(ctx context.Context) error {
		req := httptest.NewRequest(http.MethodPut, "http://github.invalid/repos/o/r/pulls/1/merge", nil).WithContext(ctx)
		if _, err := rt.RoundTrip(req); err != nil {
			return err
		}
		cancel() // the step's time runs out while the limiter waits
		_, err := rt.RoundTrip(req)
		return err // as go-github answers once the context ended
	}})
	if !errors.Is(err, context.Canceled) || sent != 1 || !marks.Fresh(mark) {
		t.Fatalf("err %v, sent %d, mark fresh %v; want the context's end, one request, the mark kept", err, sent, marks.Fresh(mark))
	}
}
