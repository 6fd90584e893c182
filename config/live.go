package config

import (
	"reflect"
	"strings"
	"sync/atomic"
)

// Live is the configuration in use, swapped whole on a reload: whoever
// reads it gets one consistent configuration, the old or the new.
type Live struct{ p atomic.Pointer[Config] }

// NewLive holds c.
func NewLive(c *Config) *Live {
	l := &Live{}
	l.p.Store(c)
	return l
}

// Get is the configuration in use now.
func (l *Live) Get() *Config { return l.p.Load() }

// Swap puts c in use and returns the one it replaces.
func (l *Live) Swap(c *Config) *Config { return l.p.Swap(c) }

// RestartOnly names the top-level settings a reload does not apply to the
// running server (they shaped what it built at start) that differ between
// old and new: each takes effect at the next start. Repositories and
// notices apply at once.
func RestartOnly(old, new *Config) []string {
	var out []string
	oldV, newV := reflect.ValueOf(*old), reflect.ValueOf(*new)
	t := oldV.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if name == "" || name == "-" || name == "repos" || name == "notices" {
			continue
		}
		if !reflect.DeepEqual(oldV.Field(i).Interface(), newV.Field(i).Interface()) {
			out = append(out, name)
		}
	}
	return out
}
