package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"opsbot/config"
)

func runHealthcheck(e *env, args []string) error {
	fs := newFlags(e, "healthcheck", "[--url URL | --config FILE]", "opsbot healthcheck --url http://127.0.0.1:8080/healthz",
		"opsbot healthcheck --config /etc/opsbot/opsbot.yaml")
	url := fs.String("url", "", "the server's health endpoint (default: http://127.0.0.1:PORT/healthz, PORT from $OPSBOT_LISTEN, "+
		"else from --config's listen, else 8080)")
	file := fs.String("config", "", "read the port from this configuration's listen")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *url == "" {
		listen := e.getenv("OPSBOT_LISTEN")
		if listen == "" && *file != "" {
			cfg, err := config.Load(*file)
			if err != nil {
				return fmt.Errorf("%w\n(check it with: opsbot config check --config %s)", err, *file)
			}
			listen = cfg.Listen
		}
		port := "8080"
		if listen != "" {
			_, p, err := net.SplitHostPort(listen)
			if err != nil {
				return fmt.Errorf("the listen address %q has no port: %w", listen, err)
			}
			port = p
		}
		*url = "http://" + net.JoinHostPort("127.0.0.1", port) + "/healthz"
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
