package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/internal/fixtures"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
	"github.com/SemiAnalysisAI/opsbot/state"
)

// bigComment is a signed issue_comment of about n bytes with no command in
// it, so the worker completes it without calling GitHub.
func (w *world) bigComment(n int) []byte {
	w.T.Helper()
	// An edit: stored in the inbox with its body (a new comment with no
	// command is recorded without its body).
	p := payload(w.T, "issue_comment", "created")
	p["action"] = "edited"
	p["changes"] = map[string]any{"body": map[string]any{"from": "notes"}}
	setPath(p, "repository.full_name", theRepo)
	setPath(p, "issue.number", thePR)
	setPath(p, "issue.pull_request", map[string]any{"url": "https://api.github.com/repos/" + theRepo + "/pulls/1"})
	setPath(p, "comment.id", w.Next())
	setPath(p, "comment.body", strings.Repeat("benchmark notes ", n/16))
	body, err := json.Marshal(p)
	if err != nil {
		w.T.Fatal(err)
	}
	return body
}

// slowBackup asks for a backup on a connection with a small receive buffer
// and reads only the response's header: the server is left writing to a
// client that does not read.
func slowBackup(t *testing.T, url string) (net.Conn, *http.Response) {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "GET /api/v1/backup HTTP/1.1\r\nHost: opsbot\r\nAuthorization: Bearer %s\r\n\r\n", apiToken)
	c.SetReadDeadline(testkit.Deadline(t))
	resp, err := http.ReadResponse(bufio.NewReaderSize(c, 4096), nil)
	if err != nil {
		t.Fatalf("reading the backup's response header: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("backup answered %d", resp.StatusCode)
	}
	return c, resp
}

func backupTemps(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "opsbot.db.backup-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A backup client that reads slowly holds no read transaction: a delivery
// whose commit must grow (and so remap) the database file is stored at once,
// the backup then completes whole and checks, and its temporary copy is
// removed, also when the client hangs up half way.
func TestSlowBackupReaderDoesNotStallCommits(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	// A database larger than the socket buffers, so that a client that
	// does not read leaves the server's writes blocked.
	big := w.bigComment(16 << 20)
	if code, rep := post(t, fixtures.SignedRequest(t, w.Srv.URL+"/webhook", "issue_comment", w.ID(), big, testSecret)); code != http.StatusAccepted {
		t.Fatalf("16 MiB delivery: %d %v", code, rep)
	}
	w.Settle()

	conn, resp := slowBackup(t, w.Srv.URL)

	// A larger delivery than the pages freed so far: its commit must grow
	// the file past its mapping.
	bigger := w.bigComment(24 << 20)
	// A stalled commit would wait forever; 60 s leaves a loaded machine
	// (the race detector, two cores) room to store 24 MiB.
	client := &http.Client{Timeout: 60 * time.Second}
	start := time.Now()
	r, err := client.Do(fixtures.SignedRequest(t, w.Srv.URL+"/webhook", "issue_comment", w.ID(), bigger, testSecret))
	if err != nil {
		t.Fatalf("a delivery's commit waited behind a backup client that does not read (%s): %v", time.Since(start), err)
	}
	io.Copy(io.Discard, r.Body)
	r.Body.Close()
	if r.StatusCode != http.StatusAccepted {
		t.Fatalf("24 MiB delivery during a slow backup: %d", r.StatusCode)
	}

	out := filepath.Join(t.TempDir(), "copy.db")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(testkit.Deadline(t))
	n, err := io.Copy(f, resp.Body)
	f.Close()
	if err != nil || n != resp.ContentLength {
		t.Fatalf("backup read %d of %d bytes: %v", n, resp.ContentLength, err)
	}
	if err := state.CheckFile(out); err != nil {
		t.Fatalf("the backup read slowly does not check: %v", err)
	}
	conn.Close()
	testkit.Eventually(t, "the backup's temporary copy is removed", func() bool { return len(backupTemps(t, w.Dir)) == 0 })

	// A client that hangs up half way: the copy is removed too.
	conn, _ = slowBackup(t, w.Srv.URL)
	if len(backupTemps(t, w.Dir)) != 1 {
		t.Fatalf("temporary copies while a backup streams: %v, want one", backupTemps(t, w.Dir))
	}
	conn.Close()
	testkit.Eventually(t, "the temporary copy of an abandoned backup is removed", func() bool { return len(backupTemps(t, w.Dir)) == 0 })
}
