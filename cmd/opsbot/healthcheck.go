package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/SemiAnalysisAI/opsbot/config"
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
	code, err := probe(ctx, *url, false)
	if err == nil && code == http.StatusBadRequest && strings.HasPrefix(*url, "http://") {
		// A server with tls.cert_file answers plain HTTP so: ask it over
		// TLS. This is a liveness probe of this machine's own server, so
		// the certificate (issued for the public name) is not checked.
		code, err = probe(ctx, "https://"+strings.TrimPrefix(*url, "http://"), true)
	}
	if err != nil {
		return fmt.Errorf("server not healthy: %w", err)
	}
	if code != http.StatusOK {
		return fmt.Errorf("server not healthy: %s answered %d", *url, code)
	}
	fmt.Fprintln(e.stdout, "ok")
	return nil
}

func probe(ctx context.Context, url string, anyCert bool) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, fmt.Errorf("bad --url: %w", err)
	}
	client := http.DefaultClient
	if anyCert {
		client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // #nosec: loopback liveness
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
