package changelog_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/changelog"
)

var rule = changelog.Rule{Repo: "SemiAnalysisAI/InferenceX"}

const pr42 = "https://github.com/SemiAnalysisAI/InferenceX/pull/42"

// block is an entry as the repository's helper tests write one.
func block(key, link string) []byte {
	return fmt.Appendf(nil, "- config-keys:\n    - %s\n  description:\n    - \"Update %s\"\n  pr-link: %s\n", key, key, link)
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

var nl = []byte("\n")

func keys(t *testing.T, raw []byte) []string {
	t.Helper()
	entries, err := changelog.Parse(raw, "result")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e["config-keys"].([]any)[0].(string))
	}
	return out
}

func link(t *testing.T, raw []byte, i int) string {
	t.Helper()
	entries, err := changelog.Parse(raw, "result")
	if err != nil {
		t.Fatal(err)
	}
	return entries[i]["pr-link"].(string)
}

func mustRefuse(t *testing.T, err error, want string) {
	t.Helper()
	var ce *changelog.Error
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want a refusal saying %q", err, want)
	}
}

// The six cases of the repository's own helper tests
// (utils/changelog_gate_tests/test_prepare_perf_changelog_merge.py), with
// the same inputs and the same bytes out.

func TestCanonicalizeOnlyChangesAppendedPlaceholder(t *testing.T) {
	base := block("historical", "XXX")
	head := cat(base, nl, block("new-config", "XXX"))
	got, err := rule.Canonicalize(base, head, 42)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(got, base) || link(t, got, 0) != "XXX" || link(t, got, 1) != pr42 {
		t.Fatalf("canonicalized:\n%s", got)
	}
	if want := cat(base, nl, block("new-config", pr42)); !bytes.Equal(got, want) {
		t.Fatalf("canonicalized:\n%s\nwant:\n%s", got, want)
	}
}

func TestCanonicalizeRejectsHistoricalWhitespaceChange(t *testing.T) {
	base := block("historical", "XXX")
	head := bytes.Replace(base, []byte("    - \"Update historical\"\n"), []byte("    - \"Update historical\"  \n"), 1)
	head = cat(head, nl, block("new-config", "XXX"))
	_, err := rule.Canonicalize(base, head, 42)
	mustRefuse(t, err, "historical")
}

func TestConflictResolutionPreservesMainBytesAndAppendsPREntry(t *testing.T) {
	base := block("base-config", "https://github.com/SemiAnalysisAI/InferenceX/pull/1")
	pr := cat(base, nl, block("pr-config", "XXX"))
	main := cat(base, []byte("  \n"), block("main-config", "https://github.com/SemiAnalysisAI/InferenceX/pull/41"))
	got, err := rule.Resolve(base, pr, main, 42)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(got, main) || !bytes.HasPrefix(got[len(main):], []byte("\n- config-keys:")) ||
		!bytes.Contains(got[:len(main)], []byte("  \n")) {
		t.Fatalf("resolved:\n%s", got)
	}
	if k := strings.Join(keys(t, got), ","); k != "base-config,main-config,pr-config" {
		t.Fatalf("entries %s", k)
	}
	if l := link(t, got, 2); l != pr42 {
		t.Fatalf("the PR's entry links %s", l)
	}
	if want := cat(main, nl, block("pr-config", pr42)); !bytes.Equal(got, want) {
		t.Fatalf("resolved:\n%q\nwant:\n%q", got, want)
	}
}

func TestConflictResolutionAppliesOnlyRequestedLinkCorrection(t *testing.T) {
	oldLink, newLink := "https://github.com/NVIDIA/InferenceMAX/pull/1722", "https://github.com/SemiAnalysisAI/InferenceX/pull/1722"
	base := block("base-config", oldLink)
	pr := block("base-config", newLink)
	main := cat(base, nl, block("main-config", "https://github.com/SemiAnalysisAI/InferenceX/pull/41"))
	got, err := rule.Resolve(base, pr, main, 42)
	if err != nil {
		t.Fatal(err)
	}
	if want := bytes.Replace(main, []byte(oldLink), []byte(newLink), 1); !bytes.Equal(got, want) {
		t.Fatalf("resolved:\n%s\nwant:\n%s", got, want)
	}
}

func TestConflictResolutionRejectsDuplicateRemainingContribution(t *testing.T) {
	base := block("base-config", "https://github.com/SemiAnalysisAI/InferenceX/pull/1")
	pr := cat(base, nl, block("same-config", "XXX"))
	main := cat(base, nl, block("same-config", "https://github.com/SemiAnalysisAI/InferenceX/pull/41"))
	_, err := rule.Resolve(base, pr, main, 42)
	mustRefuse(t, err, "no changelog contribution")
}

func TestConflictResolutionSeparatesMultipleContributionsByOneBlankLine(t *testing.T) {
	base := block("base-config", "https://github.com/SemiAnalysisAI/InferenceX/pull/1")
	pr := cat(base, nl, block("new-a", "XXX"), nl, block("new-b", "XXX"))
	main := cat(base, nl, block("main-config", "https://github.com/SemiAnalysisAI/InferenceX/pull/41"))
	got, err := rule.Resolve(base, pr, main, 42)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(got, main) {
		t.Fatalf("main's bytes changed:\n%s", got)
	}
	if k := strings.Join(keys(t, got), ","); k != "base-config,main-config,new-a,new-b" {
		t.Fatalf("entries %s", k)
	}
	if bytes.Count(got, []byte("- config-keys:")) != 4 || bytes.Count(got, []byte("\n\n- config-keys:")) != 3 ||
		bytes.Contains(got, []byte("\n\n\n")) || !bytes.HasSuffix(got, nl) || bytes.HasSuffix(got, []byte("\n\n")) {
		t.Fatalf("separators:\n%q", got)
	}
}

// What the rule refuses, beyond the helper's tests: every refusal is an
// error, never a file.
func TestResolveFailsClosed(t *testing.T) {
	base := block("base-config", "https://github.com/SemiAnalysisAI/InferenceX/pull/1")
	main := cat(base, nl, block("main-config", "https://github.com/SemiAnalysisAI/InferenceX/pull/41"))
	good := cat(base, nl, block("pr-config", "XXX"))
	for _, c := range []struct {
		name           string
		base, pr, main []byte
		want           string
	}{
		{"a PR that deleted an entry", base, []byte("[]\n"), main, "entries were deleted"},
		{"a PR that rewrote an entry", base, bytes.Replace(good, []byte("Update base-config"), []byte("Changed"), 1), main, "entry 1 changed"},
		{"a PR entry linking another PR", base, cat(base, nl, block("pr-config", "https://github.com/SemiAnalysisAI/InferenceX/pull/7")), main, "new PR entry must use"},
		{"a PR that changed nothing", base, base, main, "no appended entry or pr-link correction"},
		{"an addition without its empty line", base, cat(base, block("pr-config", "XXX")), main, "separated from history by one empty line"},
		{"two empty lines between additions", base, cat(base, nl, block("a", "XXX"), nl, nl, block("b", "XXX")), main, "exactly one empty separator line"},
		{"a tab", base, bytes.Replace(good, []byte("    - pr-config"), []byte("\t- pr-config"), 1), main, "contains tabs"},
		{"a CR", base, bytes.ReplaceAll(good, nl, []byte("\r\n")), main, "contains CR"},
		{"no final newline", base, bytes.TrimSuffix(good, nl), main, "does not end with a newline"},
		{"a duplicate key", base, cat(good[:len(good)-1], []byte("\n  pr-link: XXX\n")), main, "not valid YAML"},
		{"an unknown field", base, cat(good, []byte("  owner: me\n")), main, "extra inputs are not permitted"},
		{"a second document", base, cat(good, []byte("---\nfoo: 1\n")), main, "not one YAML document"},
		{"an entry the line count misses", base, cat(good, []byte("-   config-keys: [x]\n    description: [y]\n    pr-link: XXX\n")), main, "top-level config entries"},
		{"append-only with an eval selection", base, cat(good[:len(good)-1], []byte("\n  append-only: true\n  evals-only: true\n")), main, "append-only cannot be combined"},
		{"a main that is no changelog", base, good, []byte("nope\n"), "root must be a YAML list"},
		{"an alias to an anchor main redefines", []byte("- config-keys: &k [a-config]\n  description: [x]\n  pr-link: https://github.com/SemiAnalysisAI/InferenceX/pull/1\n"),
			[]byte("- config-keys: &k [a-config]\n  description: [x]\n  pr-link: https://github.com/SemiAnalysisAI/InferenceX/pull/1\n\n- config-keys: *k\n  description: [y]\n  pr-link: XXX\n"),
			main, "uses a YAML anchor"},
		{"a merge key", base, cat(good[:len(good)-1], []byte("\n  <<: {evals-only: true}\n")), main, "merge key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := rule.Resolve(c.base, c.pr, c.main, 42)
			if err == nil {
				t.Fatalf("resolved to:\n%s", got)
			}
			mustRefuse(t, err, c.want)
		})
	}
	// Corrections: main changed the corrected entry, or linked it elsewhere.
	oldLink, newLink := "https://github.com/NVIDIA/InferenceMAX/pull/1722", "https://github.com/SemiAnalysisAI/InferenceX/pull/1722"
	b := block("base-config", oldLink)
	_, err := rule.Resolve(b, block("base-config", newLink), block("base-config", "https://github.com/SemiAnalysisAI/InferenceX/pull/9"), 42)
	mustRefuse(t, err, "conflicting pr-link")
	_, err = rule.Resolve(b, block("base-config", newLink), block("other-config", oldLink), 42)
	mustRefuse(t, err, "main changed corrected entry 1")
	_, err = rule.Resolve(b, block("base-config", newLink), block("base-config", newLink), 42)
	mustRefuse(t, err, "already present on main")
}

// A comment inside the PR's entry travels with its bytes; main's file,
// ending in an empty line already, gets no second one.
func TestResolveKeepsTheEntrysOwnBytes(t *testing.T) {
	base := block("base-config", "https://github.com/SemiAnalysisAI/InferenceX/pull/1")
	entry := []byte("- config-keys:\n    - pr-config # the new one\n  description:\n    - \"Update\"\n  pr-link: XXX\n")
	main := cat(base, nl, block("main-config", "https://github.com/SemiAnalysisAI/InferenceX/pull/41"), nl)
	got, err := rule.Resolve(cat(base, nl), cat(base, nl, entry), main, 42)
	if err != nil {
		t.Fatal(err)
	}
	want := cat(main, bytes.Replace(entry, []byte("pr-link: XXX"), []byte("pr-link: "+pr42), 1))
	if !bytes.Equal(got, want) {
		t.Fatalf("resolved:\n%q\nwant:\n%q", got, want)
	}
}
