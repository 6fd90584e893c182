package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/server"
)

// RunOptions say where Run's configuration came from and where it says
// where it serves.
type RunOptions struct {
	// File is the configuration file, read again on a reload (SIGHUP, POST
	// /api/v1/reload); Overrides applies the flags and environment that
	// override it, to a reloaded configuration too.
	File      string
	Overrides func(*config.Config)
	// Stdout is told "opsbot serving on URL" (and the metrics' URL) once
	// the server listens.
	Stdout io.Writer
	// Listener and MetricsListener, when set, are cfg.Listen and
	// cfg.Metrics.Listen already listened on (Listen): a port in use is
	// refused before the database is opened. Run closes them.
	Listener, MetricsListener net.Listener
}

// Listen listens on cfg.Listen and, when set, cfg.Metrics.Listen, for
// RunOptions: serve does it before anything else is made, so a port in
// use is said before a database is created or opened.
func Listen(cfg *config.Config) (ln, mln net.Listener, err error) {
	ln, err = net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, nil, ListenError("listen", cfg.Listen, err)
	}
	if cfg.Metrics.Listen != "" {
		if mln, err = net.Listen("tcp", cfg.Metrics.Listen); err != nil {
			ln.Close()
			return nil, nil, ListenError("metrics.listen", cfg.Metrics.Listen, err)
		}
	}
	return ln, mln, nil
}

// Run serves cfg (read and checked by the caller: config.Load, Preflight)
// until ctx ends: it builds the app, starts it, listens on cfg.Listen (and
// metrics.listen), serves HTTPS when tls is set, and reloads the
// configuration on SIGHUP. `opsbot serve` and the end-to-end tests run the
// server through it.
func Run(ctx context.Context, cfg *config.Config, d Deps, o RunOptions) error {
	log := d.Log
	a, err := New(ctx, cfg, d)
	if err != nil {
		for _, l := range []net.Listener{o.Listener, o.MetricsListener} {
			if l != nil {
				l.Close()
			}
		}
		return err
	}
	defer a.Close()
	a.file, a.overrides = o.File, o.Overrides
	if a.overrides == nil {
		a.overrides = func(*config.Config) {}
	}
	if err := a.Start(); err != nil {
		for _, l := range []net.Listener{o.Listener, o.MetricsListener} {
			if l != nil {
				l.Close()
			}
		}
		return err
	}
	// SIGHUP reads the configuration again, as POST /api/v1/reload does.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				a.Reload()
			}
		}
	}()
	ln, mln := o.Listener, o.MetricsListener
	if ln == nil {
		if ln, mln, err = Listen(cfg); err != nil {
			a.Stop()
			return err
		}
	}
	if mln != nil && a.metricsHandler == nil {
		mln.Close()
	} else if mln != nil {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", a.metricsHandler)
		ms := &http.Server{Handler: mux, ReadHeaderTimeout: cfg.HTTP.ReadHeaderTimeout, ReadTimeout: cfg.HTTP.ReadTimeout,
			WriteTimeout: cfg.HTTP.WriteTimeout, IdleTimeout: cfg.HTTP.IdleTimeout, MaxHeaderBytes: 16 << 10}
		go func() {
			if err := ms.Serve(mln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				a.log.Error("serving metrics", "err", err)
			}
		}()
		defer ms.Close()
		fmt.Fprintf(o.Stdout, "opsbot metrics on http://%s/metrics\n", mln.Addr())
	}
	scheme := "http"
	if cfg.TLS.CertFile != "" {
		certs := &server.CertFiles{CertFile: cfg.TLS.CertFile, KeyFile: cfg.TLS.KeyFile,
			OnError: func(err error) {
				log.Error("a changed TLS certificate does not load; the last good one stays in use", "err", err)
			}}
		if err := certs.Load(); err != nil {
			ln.Close()
			a.Stop()
			return err
		}
		a.tls, scheme = certs.TLSConfig(), "https"
	}
	fmt.Fprintf(o.Stdout, "opsbot serving on %s://%s\n", scheme, ln.Addr())
	return a.Serve(ln)
}
