package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// The baselines: each engine's own tools, through their command-line
// clients, on the same table as migrate.

// myFiles is where MariaDB's file baselines write and read: SELECT … INTO
// OUTFILE and LOAD DATA INFILE in the server's secure_file_priv folder;
// when the server forbids them (NULL), the client exports to a file and
// loads it with LOAD DATA LOCAL INFILE.
type myFiles struct {
	dir  string // the folder the server reads and writes; "": the client-side fallback
	bulk string // the MY->MY baseline, as the table names it
	mode string // how, for the report's header
}

// setupMYFiles finds out how MariaDB may read and write files.
func (b *Bench) setupMYFiles(ctx context.Context) error {
	var priv *string
	if err := b.svc.Scan(ctx, MY, "", "SELECT @@secure_file_priv", &priv); err != nil {
		return err
	}
	switch {
	case priv == nil:
		b.my = myFiles{
			bulk: "client export + LOAD LOCAL",
			mode: "client export + LOAD DATA LOCAL INFILE (the server's secure_file_priv is NULL: restart it with scripts/services.sh for INTO OUTFILE)",
		}
		b.logf("MariaDB forbids INTO OUTFILE (secure_file_priv is NULL; scripts/services.sh sets it on the next start): falling back to the client's export + LOAD DATA LOCAL INFILE")
	case *priv == "":
		// any folder will do: one the server (user mysql) can reach and write
		dir := filepath.Join(b.work, "myfiles")
		if err := os.Mkdir(dir, 0o777); err != nil {
			return err
		}
		if err := os.Chmod(b.work, 0o711); err != nil {
			return err
		}
		if err := os.Chmod(dir, 0o777); err != nil {
			return err
		}
		b.my = myFiles{dir: dir, bulk: "INTO OUTFILE + LOAD DATA", mode: "SELECT INTO OUTFILE + LOAD DATA INFILE"}
	default:
		dir := filepath.Clean(*priv)
		b.my = myFiles{dir: dir, bulk: "INTO OUTFILE + LOAD DATA", mode: "SELECT INTO OUTFILE + LOAD DATA INFILE (in " + dir + ")"}
	}
	return nil
}

// myFile is the path of a bulk file of this bench.
func (b *Bench) myFile(name string) string {
	if b.my.dir != "" {
		return filepath.Join(b.my.dir, b.tag+"-"+name+".tsv")
	}
	return filepath.Join(b.work, name+".tsv")
}

// myExport writes the table of db to file, in LOAD DATA's default format.
func (b *Bench) myExport(ctx context.Context, db, file string) error {
	_ = os.Remove(file)
	if b.my.dir != "" {
		return runTool(b.svc.Mariadb(ctx, db, "-e", "SELECT * FROM orders INTO OUTFILE '"+file+"'"))
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer f.Close()
	// --raw: no escaping by the client; the seeded values have no tab, newline or backslash.
	cmd := b.svc.Mariadb(ctx, db, "--quick", "--raw", "-e", `SELECT id, ext_id, title, body, amount, status, created_at, updated_at,
      IFNULL(note, '\\N'), active FROM orders`)
	cmd.Stdout = f
	if err := runTool(cmd); err != nil {
		return err
	}
	return f.Close()
}

// myLoad loads file into the (empty) table of db.
func (b *Bench) myLoad(ctx context.Context, db, file string) error {
	if b.my.dir != "" {
		return runTool(b.svc.Mariadb(ctx, db, "-e", "LOAD DATA INFILE '"+file+"' INTO TABLE orders"))
	}
	return runTool(b.svc.Mariadb(ctx, db, "--local-infile=1", "-e", "LOAD DATA LOCAL INFILE '"+file+"' INTO TABLE orders"))
}

// freshTable is an empty table in a fresh target database of engine e.
func (b *Bench) freshTable(ctx context.Context, e Engine) error {
	if err := b.svc.Fresh(ctx, e, dstDB); err != nil {
		return err
	}
	ddl := pgDDL
	if e == MY {
		ddl = myDDL
	}
	return b.svc.Exec(ctx, e, dstDB, ddl)
}

// basePGPipe copies PostgreSQL to PostgreSQL through psql's COPY, in format.
func (b *Bench) basePGPipe(ctx context.Context, format string) error {
	if err := b.freshTable(ctx, PG); err != nil {
		return err
	}
	err := b.timed("pg-pg.copy-"+format, func() error {
		return pipe(b.svc.Psql(ctx, srcDB, "-c", "COPY orders TO STDOUT (FORMAT "+format+")"),
			b.svc.Psql(ctx, dstDB, "-c", "COPY orders FROM STDIN (FORMAT "+format+")"))
	})
	if err != nil {
		return err
	}
	return b.checkLoaded(ctx, PG)
}

// basePGBatches is the floor of any copy in durable batches: psql's COPY
// pipe in text, the target side cut into transactions of batch rows (BEGIN,
// COPY of the rows, COMMIT), with no fence, cursor or decoding — what
// the product's 1000-row durable transactions cost the server by
// themselves.
func (b *Bench) basePGBatches(ctx context.Context, batch int) error {
	if err := b.freshTable(ctx, PG); err != nil {
		return err
	}
	err := b.timed("pg-pg.copy-batches", func() error {
		from := b.svc.Psql(ctx, srcDB, "-c", "COPY orders TO STDOUT")
		to := b.svc.Psql(ctx, dstDB, "-v", "ON_ERROR_STOP=1")
		out, err := from.StdoutPipe()
		if err != nil {
			return err
		}
		in, err := to.StdinPipe()
		if err != nil {
			return err
		}
		var e1, e2 bytes.Buffer
		from.Stderr, to.Stderr = &e1, &e2
		if err := from.Start(); err != nil {
			return err
		}
		if err := to.Start(); err != nil {
			_ = from.Process.Kill()
			_ = from.Wait()
			return err
		}
		werr := batchScript(in, out, batch)
		_ = in.Close()
		errFrom, errTo := from.Wait(), to.Wait()
		switch {
		case errFrom != nil:
			return toolError(from, errFrom, e1.String())
		case errTo != nil:
			return toolError(to, errTo, e2.String())
		}
		return werr
	})
	if err != nil {
		return err
	}
	return b.checkLoaded(ctx, PG)
}

// batchScript writes COPY's text rows from r to w as a psql script of
// transactions of n rows each.
func batchScript(w io.Writer, r io.Reader, n int) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	rows := 0
	for sc.Scan() {
		if rows%n == 0 {
			if rows > 0 {
				bw.WriteString("\\.\nCOMMIT;\n")
			}
			bw.WriteString("BEGIN;\nCOPY orders FROM STDIN;\n")
		}
		bw.Write(sc.Bytes())
		bw.WriteByte('\n')
		rows++
	}
	if rows > 0 {
		bw.WriteString("\\.\nCOMMIT;\n")
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return bw.Flush()
}

// baseMYMY is INTO OUTFILE then LOAD DATA INFILE, timed apart and together.
func (b *Bench) baseMYMY(ctx context.Context) error {
	f := b.myFile("export")
	if err := b.freshTable(ctx, MY); err != nil {
		return err
	}
	t0 := time.Now()
	if err := b.myExport(ctx, srcDB, f); err != nil {
		return err
	}
	t1 := time.Now()
	if err := b.myLoad(ctx, dstDB, f); err != nil {
		return err
	}
	t2 := time.Now()
	_ = os.Remove(f)
	if err := b.checkLoaded(ctx, MY); err != nil {
		return err
	}
	export, load, both := t1.Sub(t0).Seconds(), t2.Sub(t1).Seconds(), t2.Sub(t0).Seconds()
	b.record("my-my.export", export, 0)
	b.record("my-my.load", load, 0)
	b.record("my-my.outfile-load", both, 0)
	b.logf("  my-my.outfile-load: %.3f s (export %.3f + load %.3f)", both, export, load)
	return nil
}

// baseRead reads the whole source table of engine e with its client, to
// /dev/null.
func (b *Bench) baseRead(ctx context.Context, e Engine) error {
	cmd := b.svc.Psql(ctx, srcDB, "-c", "COPY orders TO STDOUT")
	if e == MY {
		cmd = b.svc.Mariadb(ctx, srcDB, "--quick", "-e", "SELECT * FROM orders")
	}
	return b.timed(string(e)+".read", func() error { return runTool(cmd) })
}

// baseLoad bulk-loads the file made beforehand into a fresh table of engine e.
func (b *Bench) baseLoad(ctx context.Context, e Engine) error {
	if err := b.freshTable(ctx, e); err != nil {
		return err
	}
	err := b.timed(string(e)+".load", func() error {
		if e == MY {
			return b.myLoad(ctx, dstDB, b.myFile("load"))
		}
		f, err := os.Open(filepath.Join(b.work, "pg.copy"))
		if err != nil {
			return err
		}
		defer f.Close()
		cmd := b.svc.Psql(ctx, dstDB, "-c", "COPY orders FROM STDIN")
		cmd.Stdin = f
		return runTool(cmd)
	})
	if err != nil {
		return err
	}
	return b.checkLoaded(ctx, e)
}

// writeLoadFiles writes the files of the raw bulk loads, beforehand.
func (b *Bench) writeLoadFiles(ctx context.Context) error {
	b.logf("writing the bulk-load files")
	f, err := os.Create(filepath.Join(b.work, "pg.copy"))
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := b.svc.Psql(ctx, srcDB, "-c", "COPY orders TO STDOUT")
	cmd.Stdout = f
	if err := runTool(cmd); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return b.myExport(ctx, srcDB, b.myFile("load"))
}

// hashBoth hashes both tables of engine e whole, in their own databases,
// at once.
func (b *Bench) hashBoth(ctx context.Context, e Engine) error {
	hash := func(db string) func() error {
		cmd := b.svc.Psql(ctx, db, "-c", "SELECT sum(hashtextextended(t::text, 0)) FROM orders t")
		if e == MY {
			cmd = b.svc.Mariadb(ctx, db, "-e", "CHECKSUM TABLE orders")
		}
		return func() error { return runTool(cmd) }
	}
	return b.timed(fmt.Sprintf("%s-%s.hash-both", e, e), func() error {
		src, dst := make(chan error, 1), hash(dstDB)
		go func() { src <- hash(srcDB)() }()
		errDst := dst()
		if err := <-src; err != nil {
			return err
		}
		return errDst
	})
}
