package githubtest

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/google/go-github/v62/github"
)

func (f *Fake) status(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	var in github.RepoStatus
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		return http.StatusUnprocessableEntity, map[string]string{"message": "Validation Failed"}
	}
	switch in.GetState() {
	case "error", "failure", "pending", "success":
	default:
		return http.StatusUnprocessableEntity, map[string]string{"message": "Validation Failed"}
	}
	if len(in.GetDescription()) > 140 {
		return http.StatusUnprocessableEntity, map[string]string{"message": "description is too long (maximum is 140 characters)"}
	}
	f.statuses = append(f.statuses, Status{Repo: repo.Owner + "/" + repo.Name, SHA: r.PathValue("sha"), State: in.GetState(),
		Description: in.GetDescription(), Context: in.GetContext(), TargetURL: in.GetTargetURL()})
	return http.StatusCreated, &in
}

func (f *Fake) listStatuses(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	full := repo.Owner + "/" + repo.Name
	out := []*github.RepoStatus{}
	for i := len(f.statuses) - 1; i >= 0; i-- { // newest first, as GitHub lists them
		st := f.statuses[i]
		if strings.EqualFold(st.Repo, full) && st.SHA == r.PathValue("sha") {
			out = append(out, &github.RepoStatus{State: github.String(st.State), Description: github.String(st.Description),
				Context: github.String(st.Context), TargetURL: github.String(st.TargetURL)})
		}
	}
	page := paginate(w, r, len(out))
	return http.StatusOK, out[page.from:page.to]
}
