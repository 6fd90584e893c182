package docs

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The README's install section names what a release publishes, as the
// release workflow and the build script name it: the module path for go
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
	start := strings.Index(readme, "\n## Installing\n")
	if start < 0 {
		t.Fatal("the README has no Installing section")
	}
	section := readme[start:]
	if end := strings.Index(section[1:], "\n## Layout"); end > 0 {
		section = section[:end+1]
	}
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
			t.Errorf("the README's Installing section lacks %q", want)
		}
	}
	for _, m := range regexp.MustCompile(`ghcr\.io/[A-Za-z0-9_./-]+`).FindAllString(readme, -1) {
		if m != image && !strings.HasPrefix(m, image+":") && m != "ghcr.io/" && m != "ghcr.io/OWNER/REPO" {
			t.Errorf("the README names the image %s; the release pushes %s", m, image)
		}
	}
	if !strings.Contains(read("../LICENSE"), "Apache License") {
		t.Error("LICENSE is not the Apache License")
	}
}
