package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/config"
)

// Connection flags every client command takes, anywhere after its name.
// A token is never taken from the command line (it would show in ps and
// shell history): from --token-file, $RIBKEEPER_TOKEN_FILE or
// $RIBKEEPER_TOKEN.
var connectionFlags = map[string]bool{"socket": true, "config": true, "url": true, "token-file": true, "ca-file": true}

// Main runs a client command (args exclude the program name, e.g.
// "rule list --url https://rk1:8443") and returns the exit code as Run
// does. The daemon is reached over TCP with --url URL (or $RIBKEEPER_URL),
// a bearer token from --token-file FILE, $RIBKEEPER_TOKEN_FILE or
// $RIBKEEPER_TOKEN, and --ca-file FILE (or $RIBKEEPER_CACERT) for a private
// CA; otherwise over the
// control socket: --socket PATH, the [api] socket of --config FILE,
// $RIBKEEPER_SOCKET, or ./data/ribkeeper.sock. Commands and output are the
// same either way.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := args[0]
	flags := map[string]string{}
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || !connectionFlags[name] {
			if strings.HasPrefix(a, "-") && name == "token" {
				fmt.Fprintf(stderr, "ribkeeper %s: no --token on the command line (ps and shell history would show it): use --token-file FILE or $RIBKEEPER_TOKEN\n", cmd)
				return exitUsage
			}
			rest = append(rest, a)
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				fmt.Fprintf(stderr, "ribkeeper %s: --%s needs a value (see 'ribkeeper --help')\n", cmd, name)
				return exitUsage
			}
			i++
			val = args[i]
		}
		flags[name] = val
	}
	c, err := connect(flags)
	if err != nil {
		fmt.Fprintf(stderr, "ribkeeper %s: %s\n", cmd, safeText(api.OneLine(err.Error())))
		return exitUsage
	}
	return RunWith(ctx, c, rest, stdout, stderr)
}

// connect builds the client the connection flags (and the environment) ask for.
func connect(flags map[string]string) (*Client, error) {
	tcp := flags["url"] != "" || flags["token-file"] != "" || flags["ca-file"] != ""
	if flags["url"] != "" && (flags["socket"] != "" || flags["config"] != "") {
		return nil, fmt.Errorf("give --url or --socket/--config, not both")
	}
	url := flags["url"]
	if url == "" && flags["socket"] == "" && flags["config"] == "" {
		url = os.Getenv("RIBKEEPER_URL")
		tcp = tcp || url != ""
	}
	if tcp {
		if url == "" {
			return nil, fmt.Errorf("--token-file and --ca-file need --url (or $RIBKEEPER_URL)")
		}
		token, err := clientToken(flags["token-file"])
		if err != nil {
			return nil, err
		}
		ca := flags["ca-file"]
		if ca == "" {
			ca = os.Getenv("RIBKEEPER_CACERT") // as the FastNetMon script reads it
		}
		return NewTCPClient(TCPTarget{URL: url, Token: token, CAFile: ca}, 0)
	}
	socket := flags["socket"]
	if path := flags["config"]; path != "" && socket == "" {
		cfg, err := config.Load(path)
		if err != nil {
			return nil, err
		}
		socket = cfg.API.Socket
	}
	if socket == "" {
		socket = os.Getenv("RIBKEEPER_SOCKET")
	}
	if socket == "" {
		socket = "./data/ribkeeper.sock"
	}
	return NewClient(socket, 0), nil
}

// clientToken reads the bearer token: the first line of file (or of
// $RIBKEEPER_TOKEN_FILE), else $RIBKEEPER_TOKEN; "" for none.
func clientToken(file string) (string, error) {
	if file == "" {
		file = os.Getenv("RIBKEEPER_TOKEN_FILE")
	}
	if file == "" {
		return strings.TrimSpace(os.Getenv("RIBKEEPER_TOKEN")), nil
	}
	f, err := os.Open(file)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	line, err := bufio.NewReader(io.LimitReader(f, 4096)).ReadString('\n')
	if err != nil && err != io.EOF {
		return "", fmt.Errorf("token file %s: %w", file, err)
	}
	token := strings.TrimSpace(line)
	if token == "" {
		return "", fmt.Errorf("token file %s: the first line is empty: write the token there", file)
	}
	return token, nil
}
