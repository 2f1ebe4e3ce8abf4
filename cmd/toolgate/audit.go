package main

import (
	"fmt"
	"io"
	"os"

	"github.com/toolgate/toolgate/approval"
)

const auditUsage = `Usage: toolgate audit verify FILE

Checks the approval records of an escalation sink file (escalation.sinks.file):
each process's records form a chain, each naming the digest of the one before,
so a record removed or altered shows. Exit 0: every chain holds; 1: a chain
breaks (the line is printed); 2: the file cannot be read.
`

// audit runs "toolgate audit verify FILE".
func audit(args []string, stdout, stderr io.Writer) int {
	if len(args) != 2 || args[0] != "verify" {
		fmt.Fprint(stderr, auditUsage)
		return 2
	}
	f, err := os.Open(args[1])
	if err != nil {
		fmt.Fprintln(stderr, "toolgate audit:", err)
		return 2
	}
	defer f.Close()
	n, err := approval.VerifyChain(f)
	if err != nil {
		fmt.Fprintf(stderr, "%s: broken: %v\n", args[1], err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: ok, %d approval records, every chain intact\n", args[1], n)
	return 0
}
