package main

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

func runHealthcheck(e *env, args []string) error {
	fs := newFlags(e, "healthcheck", "[--url URL]", "opsbot healthcheck --url http://127.0.0.1:8080/healthz")
	url := fs.String("url", "http://127.0.0.1:8080/healthz", "the server's health endpoint")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(e.ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
	if err != nil {
		return fmt.Errorf("bad --url: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("server not healthy: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("server not healthy: %s answered %s", *url, resp.Status)
	}
	fmt.Fprintln(e.stdout, "ok")
	return nil
}
