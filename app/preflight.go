package app

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/ghclient"
	"github.com/SemiAnalysisAI/opsbot/server"
	"github.com/SemiAnalysisAI/opsbot/state"
)

// Preflight is every refusal opsbot serve makes, before it opens anything,
// about a configuration that config.Load accepted and the environment it
// runs in: the one validation `serve` and `config check` share. It checks
// the listen addresses and paths again after the flags and environment
// overrode them, reads every secret the file names (a webhook secret,
// metrics.token_env naming an unset variable, short secrets, an unreadable
// VAR_FILE or App key), parses the GitHub App's key, and loads the TLS
// pair. It returns the secrets and every problem found (nil: serve starts).
func Preflight(cfg *config.Config, getenv func(string) string) (config.Secrets, config.Problems) {
	var probs config.Problems
	if err := config.CheckListenAddr(cfg.Listen); err != nil {
		probs = append(probs, "listen: "+err.Error())
	}
	probs = append(probs, cfg.CheckPaths()...)
	secrets, err := cfg.ResolveSecrets(getenv)
	var sp config.Problems
	switch {
	case errors.As(err, &sp):
		probs = append(probs, sp...)
	case err != nil:
		probs = append(probs, err.Error())
	}
	if ga := cfg.GitHub.App; ga != nil && len(secrets.AppPrivateKey) > 0 {
		if _, err := ghclient.NewFactory(ghclient.Options{APIURL: cfg.GitHub.APIURL, AppID: ga.ID, AppKey: secrets.AppPrivateKey}); err != nil {
			probs = append(probs, err.Error())
		}
	}
	if cfg.TLS.CertFile != "" {
		if err := (&server.CertFiles{CertFile: cfg.TLS.CertFile, KeyFile: cfg.TLS.KeyFile}).Load(); err != nil {
			probs = append(probs, err.Error())
		}
	}
	// The database, when there is one: a file that is not opsbot's, one of a
	// newer schema or one that cannot be read is refused by serve too. One
	// a running opsbot holds, or none yet (serve makes it), is fine here.
	if st, err := state.OpenReadOnly(cfg.StatePath, 200*time.Millisecond); err == nil {
		st.Close()
	} else if !errors.Is(err, state.ErrLocked) && !errors.Is(err, state.ErrNoDatabase) {
		probs = append(probs, "state_path: "+err.Error())
	}
	return secrets, probs
}

// ListenError says why serve could not listen on addr (the setting key
// names): another server on the port only when that is what happened.
func ListenError(key, addr string, err error) error {
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return fmt.Errorf("listening on %s %s: %w (another server is using the port: stop it, or choose another %s)", key, addr, err, key)
	case errors.Is(err, syscall.EACCES):
		return fmt.Errorf("listening on %s %s: %w (a port below 1024 needs privileges: choose a port above 1023)", key, addr, err)
	}
	return fmt.Errorf("listening on %s %s: %w", key, addr, err)
}

// NoTokenSaying is what opsbot says, at start and in config check, when it
// has no GitHub token: it still runs, and what that means.
func NoTokenSaying(cfg *config.Config) string {
	name := cfg.GitHub.TokenEnv
	if name == "" {
		name = "the variable github.token_env names"
	}
	return "no GitHub token: webhooks are received and stored; every command will be answered 'permission could not be checked' " +
		"and nothing is posted (a dry run, whatever dry_run says) until " + name + " is set"
}

// NewDatabase decides whether serve may create the database at path when
// there is none yet, so that a typo in --state or $OPSBOT_STATE_PATH (from
// says which named it; "" for the configuration's own state_path) never
// starts opsbot on a new, empty database that has forgotten every pin. It
// is created when init (--init) says so, when it is the configuration's
// own state_path, or when its directory is empty (a new volume, which may
// hold lost+found alone); it says
// what it does then (a line for the log; "" when the database exists).
// Otherwise it refuses, saying what to do.
func NewDatabase(path, from string, init bool) (string, error) {
	if _, err := os.Stat(path); err == nil || !errors.Is(err, os.ErrNotExist) {
		return "", nil // there is one (or something Preflight reported on)
	}
	switch {
	case init:
		return "no database at " + path + ": creating a new, empty one (--init)", nil
	case from == "":
		return "no database at " + path + ": creating a new, empty one (the configuration's state_path)", nil
	}
	dir := filepath.Dir(path)
	entries, err := os.ReadDir(dir)
	if err == nil && (len(entries) == 0 || len(entries) == 1 && entries[0].Name() == "lost+found") {
		// An empty directory, or a new ext4 volume's (lost+found alone).
		return "no database at " + path + ": creating a new, empty one (" + from + " names a file in an empty directory)", nil
	}
	return "", fmt.Errorf("there is no database at %s, which %s names, and its directory %s holds other files: a mistyped path "+
		"would start opsbot on a new, empty database that has forgotten every pin and decision. Check the path; to create a "+
		"new database there, add --init", path, from, dir)
}
