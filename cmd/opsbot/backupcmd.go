package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/SemiAnalysisAI/opsbot/state"
)

func runBackup(e *env, args []string) error {
	fs := newFlags(e, "backup", "(--server URL | --db PATH) --out FILE",
		"opsbot backup --server https://opsbot.example.com --out opsbot-$(date +%F).db",
		"opsbot backup --db /var/lib/opsbot/opsbot.db --out copy.db")
	serverURL := fs.String("server", "", "copy through a running server (hot, consistent; token from OPSBOT_API_TOKEN)")
	db := fs.String("db", "", "copy a database file no server holds")
	out := fs.String("out", "", "where to write the copy (must not exist)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if (*serverURL == "") == (*db == "") || *out == "" {
		fmt.Fprintln(e.stderr, "opsbot backup: give --out FILE and exactly one of --server URL or --db PATH")
		return exitCode(2)
	}
	if _, err := os.Stat(*out); err == nil {
		return fmt.Errorf("%s exists: choose another --out, or remove it first", *out)
	}
	tmp := *out + ".partial"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("creating %s: %w", tmp, err)
	}
	n, err := copyBackup(e, *serverURL, *db, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = state.CheckFile(tmp)
		if err != nil {
			err = fmt.Errorf("the copy does not pass bbolt's check: %w", err)
		}
	}
	if err == nil {
		// A database restored from the copy must not replay comments the
		// lost one may have run: its first reconcile only records them.
		if err = state.ForgetOnCopy(tmp); err != nil {
			err = fmt.Errorf("preparing the copy: %w", err)
		}
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, *out); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "wrote %s (%d bytes); it opens and passes bbolt's check\n", *out, n)
	return nil
}

func copyBackup(e *env, serverURL, db string, w io.Writer) (int64, error) {
	if db != "" {
		st, err := openForReading(db, "use --server URL for a hot backup")
		if err != nil {
			return 0, err
		}
		defer st.Close()
		return st.Backup(w)
	}
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Minute)
	defer cancel()
	token, err := e.apiToken()
	if err != nil {
		return 0, err
	}
	resp, err := callAPI(ctx, serverURL, token, http.MethodGet, "/api/v1/backup", nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return io.Copy(w, resp.Body)
}

// openForReading opens the database file a command reads (--db PATH):
// read-only, never created. A path with no file, and a file a running
// opsbot holds, are errors saying what to do; busy is the advice for the
// latter.
func openForReading(path, busy string) (*state.Store, error) {
	st, err := state.OpenReadOnly(path, 2*time.Second)
	switch {
	case errors.Is(err, state.ErrNoDatabase):
		return nil, fmt.Errorf("--db %s: no database file there; nothing was created (give the server's state_path)", path)
	case errors.Is(err, state.ErrLocked):
		return nil, fmt.Errorf("%s is held by a running opsbot: %s", path, busy)
	case err != nil:
		return nil, err
	}
	return st, nil
}
