package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/SemiAnalysisAI/opsbot/auth"
)

func runSend(e *env, args []string) error {
	fs := newFlags(e, "send", "--url URL --event EVENT --file PAYLOAD.json [--delivery ID]",
		"OPSBOT_WEBHOOK_SECRET=change-me-to-a-long-secret opsbot send --url http://127.0.0.1:8080/webhook --event ping --file testdata/fixtures/github-webhooks/ping/payload.json")
	url := fs.String("url", "http://127.0.0.1:8080/webhook", "the webhook endpoint")
	event := fs.String("event", "", "the X-GitHub-Event (issue_comment, pull_request, ...)")
	file := fs.String("file", "", "the JSON payload to send")
	delivery := fs.String("delivery", "", "the X-GitHub-Delivery id (default: a new random one)")
	secretEnv := fs.String("secret-env", "OPSBOT_WEBHOOK_SECRET", "the environment variable holding the webhook secret")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *event == "" || *file == "" {
		fmt.Fprintln(e.stderr, "opsbot send: --event and --file are required")
		return exitCode(2)
	}
	secrets := e.getenv(*secretEnv)
	if secrets == "" {
		return fmt.Errorf("%s is not set: export the webhook secret the server uses", *secretEnv)
	}
	body, err := os.ReadFile(*file)
	if err != nil {
		return fmt.Errorf("reading the payload: %w", err)
	}
	if !json.Valid(body) {
		return fmt.Errorf("%s is not valid JSON", *file)
	}
	if *delivery == "" {
		b := make([]byte, 16)
		rand.Read(b)
		*delivery = hex.EncodeToString(b)
	}
	secret, _, _ := bytes.Cut([]byte(secrets), []byte(","))
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, *url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("bad --url: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", *event)
	req.Header.Set("X-GitHub-Delivery", *delivery)
	req.Header.Set("X-Hub-Signature-256", auth.Sign(body, auth.Secret(bytes.TrimSpace(secret))))
	req.Header.Set("User-Agent", "opsbot-send/"+version)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("sending to %s: %w", *url, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	fmt.Fprintf(e.stdout, "delivery %s: %s %s", *delivery, resp.Status, answer)
	if resp.StatusCode/100 != 2 {
		return exitCode(1)
	}
	return nil
}
