package server

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// WaitReady asks a running opsbot's /readyz (base is its URL) until it is
// ready (it knows its own GitHub account and processes deliveries), ctx
// ends, or within passes.
func WaitReady(ctx context.Context, base string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("opsbot at %s was not ready within %s (see its /readyz)", base, within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
