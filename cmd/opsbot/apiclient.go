package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/SemiAnalysisAI/opsbot/config"
)

// errNoToken is every API command's answer when OPSBOT_API_TOKEN is missing.
var errNoToken = errors.New("OPSBOT_API_TOKEN is not set: export one of the server's API tokens " +
	"(a gate token for `opsbot gate`, an admin token for the others), or name a file holding it in OPSBOT_API_TOKEN_FILE")

// apiToken is the client's bearer: OPSBOT_API_TOKEN, or the content of the
// file OPSBOT_API_TOKEN_FILE names.
func (e *env) apiToken() (string, error) {
	tok, err := config.SecretValue(e.getenv, "OPSBOT_API_TOKEN")
	return strings.TrimSpace(tok), err
}

// callAPI makes one request to a server's /api/v1 with the bearer token. A
// body, if any, is sent as JSON. A non-200 answer is an error that carries
// the server's message; on success the caller reads and closes the body.
func callAPI(ctx context.Context, serverURL, token, method, path string, body any) (*http.Response, error) {
	if serverURL == "" {
		return nil, errors.New("--server is required")
	}
	if token == "" {
		return nil, errNoToken
	}
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(serverURL, "/")+path, rd)
	if err != nil {
		return nil, fmt.Errorf("bad --server: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := apiClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("asking %s: %w", serverURL, err)
	}
	if resp.StatusCode/100 == 3 {
		resp.Body.Close()
		return nil, &serverError{code: resp.StatusCode, status: resp.Status, msg: fmt.Sprintf("a redirect to %q, which opsbot does not "+
			"follow (the bearer token would go with it): give --server the address that answers", resp.Header.Get("Location"))}
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		var e struct {
			Error string `json:"error"`
		}
		msg := strings.TrimSpace(string(raw))
		if json.Unmarshal(raw, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		se := &serverError{code: resp.StatusCode, status: resp.Status, msg: msg}
		if n, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After"))); err == nil && n > 0 {
			se.retryAfter = time.Duration(min(n, 3600)) * time.Second
		}
		return nil, se
	}
	return resp, nil
}

// apiClient is the client of the API commands: it never follows a
// redirect, which would send the bearer token on to wherever it points.
var apiClient = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// serverError is a non-200 answer of the API.
type serverError struct {
	code        int
	status, msg string
	retryAfter  time.Duration // the answer's Retry-After, if any (at most an hour)
}

func (e *serverError) Error() string { return fmt.Sprintf("server answered %s: %s", e.status, e.msg) }

// getJSON calls the API and decodes its JSON answer into v.
func getJSON(ctx context.Context, serverURL, token, method, path string, body, v any) error {
	resp, err := callAPI(ctx, serverURL, token, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(v); err != nil {
		return fmt.Errorf("the server's answer is not what was expected: %w", err)
	}
	return nil
}
