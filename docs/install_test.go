package docs

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// The install page (and the README, in short) names what a release
// publishes, as the release workflow and the build script name it: the module path for go
// install, the archives and checksums.txt, and the image at ghcr.io in
// lower case (ghcr's names are); and it names the license.
func TestInstallSectionAgreesWithTheRelease(t *testing.T) {
	read := func(f string) string {
		t.Helper()
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	readme, mod := read("../README.md"), read("../go.mod")
	module := regexp.MustCompile(`(?m)^module (\S+)`).FindStringSubmatch(mod)[1]
	repo := strings.TrimPrefix(module, "github.com/")
	image := "ghcr.io/" + strings.ToLower(repo)

	if !strings.Contains(read("../.github/workflows/release.yml"), `name=ghcr.io/${REPOSITORY,,}`) {
		t.Fatal("release.yml no longer names the image ghcr.io/OWNER/REPO in lower case: make the README and this test agree with it")
	}
	if !strings.Contains(read("../.ci/build-release"), `name="opsbot_${version}_${os}_${arch}"`) {
		t.Fatal(".ci/build-release names its archives otherwise: make the README and this test agree with it")
	}
	// The README names the three forms; docs/install.md has the steps.
	// Until a release is tagged, opsbot is built from the clone.
	for _, want := range []string{"go install " + module + "/cmd/opsbot@vX.Y.Z", image + ":vX.Y.Z", "docs/install.md",
		"No release is tagged yet", "`go install ./cmd/opsbot`"} {
		if !strings.Contains(readme, want) {
			t.Errorf("the README's Installing section lacks %q", want)
		}
	}
	section := read("install.md")
	for _, want := range []string{
		"go install " + module + "/cmd/opsbot@vX.Y.Z",
		"https://github.com/" + repo + "/releases/download/$V/$P.tar.gz",
		"https://github.com/" + repo + "/releases/download/$V/checksums.txt",
		"P=opsbot_${V}_linux_amd64",
		"sha256sum -c checksums.txt --ignore-missing",
		image + ":vX.Y.Z",
		"docker run -p 8080:8080 -v opsbot-state:/data -v ./opsbot.yaml:/etc/opsbot/opsbot.yaml:ro",
		"Apache License 2.0",
		"`opsbot healthcheck` is that probe",
		"uses: ./.github/actions/opsbot-gate",
		"deploy/kubernetes",
	} {
		if !strings.Contains(section, want) {
			t.Errorf("docs/install.md lacks %q", want)
		}
	}
	for _, m := range regexp.MustCompile(`ghcr\.io/[A-Za-z0-9_./-]+`).FindAllString(readme+section, -1) {
		if m != image && !strings.HasPrefix(m, image+":") && m != "ghcr.io/" && m != "ghcr.io/OWNER/REPO" {
			t.Errorf("the README or docs/install.md names the image %s; the release pushes %s", m, image)
		}
	}
	if !strings.Contains(read("../LICENSE"), "Apache License") {
		t.Error("LICENSE is not the Apache License")
	}
}

// A release archive holds what its README needs on a machine without the
// source: the binary (stamped with the version), the README, the LICENSE
// (Apache-2.0 §4a), the docs it links to with their example workflows, the
// example configuration and the ping payload of the README's `opsbot send`.
// It builds one archive with .ci/build-release (skipped with -short).
func TestReleaseArchiveHoldsWhatTheReadmeNeeds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a release archive")
	}
	dist := t.TempDir()
	target := "linux/" + runtime.GOARCH
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		target = "linux/amd64"
	}
	cmd := exec.Command("bash", "../.ci/build-release", "v0.0.0-test", "abc1234")
	cmd.Env = append(os.Environ(), "OPSBOT_DIST="+dist, "OPSBOT_TARGETS="+target)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf(".ci/build-release: %v\n%s", err, out)
	}
	name := "opsbot_v0.0.0-test_" + strings.ReplaceAll(target, "/", "_")
	f, err := os.Open(filepath.Join(dist, name+".tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]bool{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		held[strings.TrimPrefix(h.Name, name+"/")] = true
		if h.Name == name+"/opsbot" && h.Mode&0o111 == 0 {
			t.Errorf("the binary is not executable: %o", h.Mode)
		}
	}
	want := []string{"opsbot", "README.md", "LICENSE", "opsbot.example.yaml", "testdata/fixtures/github-webhooks/ping/payload.json",
		"testdata/fixtures/github-webhooks/LICENSE"}
	docs, _ := filepath.Glob("*.md")
	examples, _ := filepath.Glob("examples/*")
	for _, d := range append(docs, examples...) {
		want = append(want, "docs/"+d)
	}
	// The install page links to the Kubernetes manifests and their README.
	k8s, _ := filepath.Glob("../deploy/kubernetes/*.yaml")
	for _, f := range append(k8s, "../deploy/kubernetes/README.md") {
		want = append(want, strings.TrimPrefix(f, "../"))
	}
	for _, w := range want {
		if !held[w] {
			t.Errorf("the archive lacks %s", w)
		}
	}
	// The README's `opsbot send` names the payload the archive holds.
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`--file (testdata/\S+)`).FindAllStringSubmatch(string(readme), -1) {
		if !held[m[1]] {
			t.Errorf("the README's opsbot send names %s, which the archive lacks", m[1])
		}
	}
	for _, f := range []string{"checksums.txt", "ca-certificates.crt", "opsbot-" + strings.ReplaceAll(target, "/", "-")} {
		if _, err := os.Stat(filepath.Join(dist, f)); err != nil {
			t.Errorf("the release lacks %s: %v", f, err)
		}
	}
	if runtime.GOOS == "linux" && target == "linux/"+runtime.GOARCH {
		out, err := exec.Command(filepath.Join(dist, "opsbot-"+strings.ReplaceAll(target, "/", "-")), "--version").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "v0.0.0-test") || !strings.Contains(string(out), "abc1234") {
			t.Errorf("the released binary's --version: %v %s", err, out)
		}
	}
}
