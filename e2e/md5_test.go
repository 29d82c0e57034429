package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
)

// TCP MD5 end to end: the password from an environment variable or a
// file; a BIRD with the same password establishes, one with another
// password never does.
func TestMD5(t *testing.T) {
	t.Run("env, same password", func(t *testing.T) {
		t.Setenv("RK_E2E_MD5", "s3cret-md5")
		a := startAppliance(t, birdtest.Options{Password: "s3cret-md5"}, `password_env = "RK_E2E_MD5"`, "", true)
		if !strings.Contains(a.mustCLI("peers"), "established") {
			t.Error("ribkeeper does not show the session established")
		}
	})
	t.Run("file, same password", func(t *testing.T) {
		pw := filepath.Join(t.TempDir(), "md5")
		os.WriteFile(pw, []byte("from-a-file\n"), 0o600)
		startAppliance(t, birdtest.Options{Password: "from-a-file"}, `password_file = "`+pw+`"`, "", true)
	})
	t.Run("wrong password", func(t *testing.T) {
		a := startAppliance(t, birdtest.Options{Password: "the-right-one"}, `password = "a-wrong-one"`, "", false)
		deadline := time.Now().Add(8 * time.Second)
		for time.Now().Before(deadline) {
			if a.bird.Established(0) {
				t.Fatal("session established with a wrong MD5 password")
			}
			time.Sleep(200 * time.Millisecond)
		}
		if strings.Contains(a.mustCLI("peers"), "established") {
			t.Error("ribkeeper shows an established session")
		}
	})
}
