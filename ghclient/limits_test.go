package ghclient

import (
	"fmt"
	"testing"
)

// A retry finds opsbot's comment on a PR with more than 50 pages of
// comments (an outsider's flood): pages are read newest first, so the
// recent comment is found at once and is not posted twice.
func TestFindCommentReadsNewestPagesFirst(t *testing.T) {
	f, c, _, _ := setup(t, nil)
	f.AddPR(repo, 2512, "octocat", "b", "base", []string{"c1"})
	for i := range 5200 {
		f.AddComment(repo, 2512, "octocat", fmt.Sprintf("noise %d", i))
	}
	ref, err := c.CreateComment(t.Context(), repo, 2512, "pinned\n<!-- opsbot:notice=7.ab -->")
	if err != nil {
		t.Fatal(err)
	}
	f.ResetRequests()
	found, ok, err := c.FindComment(t.Context(), repo, 2512, "<!-- opsbot:notice=7.ab -->")
	if err != nil || !ok || found.ID != ref.ID {
		t.Fatalf("FindComment = %+v %v %v, want the comment posted last", found, ok, err)
	}
	if n := f.Count("GET /repos/{owner}/{repo}/issues/{n}/comments"); n > 2 {
		t.Fatalf("%d pages read to find the newest comment, want 2 (the first, for the Link header, and the last)", n)
	}
}
