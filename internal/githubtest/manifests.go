package githubtest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// ManifestApp is a GitHub App registered through the manifest flow: the
// manifest the form posted, and what the conversion handed over.
type ManifestApp struct {
	ID            int64
	Slug          string
	Name          string
	Owner         string // the account's login
	OwnerType     string // User or Organization
	Manifest      map[string]any
	State         string // the state the form was posted with
	Code          string // the temporary code of the redirect
	PEM           string // the private key (PKCS#1), handed over by the conversion
	WebhookSecret string
	ClientSecret  string
	Converted     bool
}

// WebUser is the account signed in to the fake's web pages: a manifest
// posted to /settings/apps/new makes an App it owns.
const WebUser = "octocat"

// TakeAppName marks an App name as in use elsewhere on GitHub: the form
// and the conversion answer 422 "Name is already in use" for it.
func (f *Fake) TakeAppName(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.appNames == nil {
		f.appNames = map[string]bool{}
	}
	f.appNames[strings.ToLower(name)] = true
}

// ManifestApps are the Apps registered through the manifest flow, oldest first.
func (f *Fake) ManifestApps() []ManifestApp {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]ManifestApp, 0, len(f.manifestApps))
	for _, a := range f.manifestApps {
		out = append(out, *a)
	}
	return out
}

var slugUnsafe = regexp.MustCompile(`[^a-z0-9]+`)

// newAppFromManifest answers the form GitHub's "register a GitHub App from
// a manifest" page receives (POST /settings/apps/new, or
// /organizations/{org}/settings/apps/new): as after the person confirms it,
// it registers the App and redirects to the manifest's redirect_url with a
// temporary code and the state of the form's URL.
func (f *Fake) newAppFromManifest(w http.ResponseWriter, r *http.Request, _ *Repo) (int, any) {
	if err := r.ParseForm(); err != nil {
		return http.StatusBadRequest, map[string]string{"message": "Problems parsing the form"}
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(r.PostForm.Get("manifest")), &m); err != nil {
		return http.StatusBadRequest, map[string]string{"message": "Invalid manifest: " + err.Error()}
	}
	name, _ := m["name"].(string)
	redirect, _ := m["redirect_url"].(string)
	hook, _ := m["hook_attributes"].(map[string]any)
	if u, _ := m["url"].(string); name == "" || u == "" || redirect == "" || hook == nil || hook["url"] == "" {
		return http.StatusUnprocessableEntity, map[string]string{"message": "Invalid manifest: name, url, redirect_url and hook_attributes.url are required"}
	}
	if len(name) > 34 {
		return http.StatusUnprocessableEntity, map[string]string{"message": "Name is too long (maximum is 34 characters)"}
	}
	if f.appNames[strings.ToLower(name)] {
		return http.StatusUnprocessableEntity, map[string]string{"message": "Name is already in use"}
	}
	back, err := url.Parse(redirect)
	if err != nil {
		return http.StatusUnprocessableEntity, map[string]string{"message": "Invalid redirect_url"}
	}
	owner, kind := WebUser, "User"
	if org := r.PathValue("org"); org != "" {
		owner, kind = org, "Organization"
	}
	f.nextID++
	a := &ManifestApp{ID: f.nextID, Name: name, Slug: strings.Trim(slugUnsafe.ReplaceAllString(strings.ToLower(name), "-"), "-"),
		Owner: owner, OwnerType: kind, Manifest: m, State: r.URL.Query().Get("state"), Code: fmt.Sprintf("fakecode%d", f.nextID),
		WebhookSecret: fmt.Sprintf("fake-webhook-secret-%d-0123456789abcdef", f.nextID),
		ClientSecret:  fmt.Sprintf("fake-client-secret-%d", f.nextID)}
	f.manifestApps = append(f.manifestApps, a)
	q := back.Query()
	q.Set("code", a.Code)
	if a.State != "" {
		q.Set("state", a.State)
	}
	back.RawQuery = q.Encode()
	w.Header().Set("Location", back.String())
	return http.StatusFound, nil
}

// convertManifest answers POST /app-manifests/{code}/conversions: once per
// code, the App's id, slug, owner, client credentials, webhook secret and
// private key, in GitHub's shape (201).
func (f *Fake) convertManifest(w http.ResponseWriter, r *http.Request, _ *Repo) (int, any) {
	var a *ManifestApp
	for _, x := range f.manifestApps {
		if x.Code == r.PathValue("code") && !x.Converted {
			a = x
		}
	}
	if a == nil {
		return http.StatusNotFound, notFound()
	}
	if f.appNames[strings.ToLower(a.Name)] {
		return http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed",
			"errors":            []map[string]string{{"resource": "Integration", "code": "custom", "field": "name", "message": "Name is already in use"}},
			"documentation_url": "https://docs.github.com/rest/apps/apps#create-a-github-app-from-a-manifest"}
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return http.StatusInternalServerError, map[string]string{"message": err.Error()}
	}
	a.PEM = string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	a.Converted = true
	if f.appNames == nil {
		f.appNames = map[string]bool{}
	}
	f.appNames[strings.ToLower(a.Name)] = true
	now := f.now().UTC().Format(time.RFC3339)
	web := strings.TrimSuffix(f.URL, "/")
	ownerID := int64(1)
	if a.OwnerType == "Organization" {
		ownerID = 2
	}
	return http.StatusCreated, map[string]any{
		"id": a.ID, "slug": a.Slug, "node_id": fmt.Sprintf("A_fake%d", a.ID), "name": a.Name,
		"owner": map[string]any{"login": a.Owner, "id": ownerID, "type": a.OwnerType, "html_url": web + "/" + a.Owner,
			"site_admin": false},
		"description": a.Manifest["description"], "external_url": a.Manifest["url"], "html_url": web + "/apps/" + a.Slug,
		"created_at": now, "updated_at": now,
		"permissions": a.Manifest["default_permissions"], "events": a.Manifest["default_events"],
		"client_id": fmt.Sprintf("Iv1.fake%d", a.ID), "client_secret": a.ClientSecret,
		"webhook_secret": a.WebhookSecret, "pem": a.PEM,
	}
}
