package loadgen

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/SemiAnalysisAI/opsbot/auth"
)

// FloorArg is the argument that makes the bench program run the reference
// receiver (ServeFloor) instead of a benchmark; the ingest scenario starts
// it so with Options.FloorCommand.
const FloorArg = "floor-receiver"

// floorMaxBody is GitHub's largest delivery, the limit opsbot reads to.
const floorMaxBody = 25 << 20

// ServeFloor is the reference receiver ingest is measured against: what
// answering a webhook costs before opsbot does anything of its own. It
// checks the headers GitHub sends, reads the body (up to 25 MiB), checks its
// signature with opsbot's own code, and answers 202 in opsbot's shape,
// storing nothing. It serves on a loopback port until ctx ends and prints
// "floor serving on URL" to out.
func ServeFloor(ctx context.Context, out io.Writer) error {
	secrets := []auth.Secret{secret}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /webhook", func(w http.ResponseWriter, r *http.Request) {
		id, event := r.Header.Get("X-GitHub-Delivery"), r.Header.Get("X-GitHub-Event")
		answer := func(code int, status string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			json.NewEncoder(w).Encode(map[string]string{"status": status, "delivery": id})
		}
		if id == "" || event == "" || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			answer(http.StatusBadRequest, "rejected")
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, floorMaxBody))
		if err != nil {
			answer(http.StatusRequestEntityTooLarge, "rejected")
			return
		}
		if err := auth.VerifySignature(body, r.Header.Get("X-Hub-Signature-256"), secrets); err != nil {
			answer(http.StatusUnauthorized, "rejected")
			return
		}
		answer(http.StatusAccepted, "stored")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(out, "floor serving on http://%s\n", ln.Addr())
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// startFloor starts the reference receiver as its own process (as opsbot
// runs in its own) and returns its URL.
func startFloor(ctx context.Context, command []string, cl *cleanup) (string, error) {
	if len(command) == 0 {
		return "", errors.New("loadgen: no command to start the reference receiver (Options.FloorCommand)")
	}
	cmd := exec.CommandContext(ctx, command[0], command[1:]...)
	u, err := startServing(cmd, "floor serving on ", 10*time.Second, cl)
	if err != nil {
		return "", fmt.Errorf("the reference receiver %s: %w", command[0], err)
	}
	return u, nil
}

// startServing starts cmd (its stderr shown), waits for the stdout line
// that starts with prefix and returns the rest (its URL), and registers its
// stop with cl: an interrupt, then a kill after grace.
func startServing(cmd *exec.Cmd, prefix string, grace time.Duration, cl *cleanup) (string, error) {
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("starting it: %w", err)
	}
	cl.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(grace):
			cmd.Process.Kill()
		}
	})
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			go io.Copy(io.Discard, out)
			return u, nil
		}
	}
	return "", errors.New("it did not start (no line " + strings.TrimSpace(prefix) + ")")
}
