package main

// Environment variables of the services some mutations' tests need.
const (
	postgres  = "IDEMKIT_POSTGRES_URL"
	dynamodb  = "IDEMKIT_DYNAMODB_URL"
	firestore = "IDEMKIT_FIRESTORE_EMULATOR_HOST"
)

// mutations lists each condition a guarantee rests on, the change that
// removes it, and the tests that must then fail. Add one with every new
// condition; docs/mutation.md says how.
var mutations = []mutation{
	// The op record: created if absent, keyed by scope, compared by
	// fingerprint, one call per op id in a process.
	{
		Name:   "idem/op-record-create",
		Guards: "the op record is created only if absent, so a repeat on another server replays",
		File:   "idem/middleware.go",
		From:   "return tx.Create(ctx, o.key, rec, backend.WithExpiry(rec.ExpiresAt), backend.CreateAtCommit())",
		To:     "return tx.Put(ctx, o.key, rec, backend.WithExpiry(rec.ExpiresAt), backend.CreateAtCommit())",
		Pkg:    "./store/memory",
		Run:    "^TestConformance$/^Middleware$/^(RepeatOnAnotherServer|ConcurrentAcrossServers)$",
	},
	{
		Name:   "idem/scope-in-op-key",
		Guards: "op ids are kept per scope: one caller never gets another's result",
		File:   "idem/middleware.go",
		From:   "o.key = oprecord.Key(scope, o.tool, opID)",
		To:     `o.key = oprecord.Key("", o.tool, opID)`,
		Pkg:    "./store/memory",
		Run:    "^TestConformance$/^Middleware$/^ScopesKeepOpsApart$",
	},
	{
		Name:   "oprecord/scope-in-key",
		Guards: "the op record's key (owner and hash) holds the scope",
		File:   "internal/oprecord/oprecord.go",
		From: `	for _, s := range []string{scope, tool, opID} {
		b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
		b = append(b, s...)
	}
	return backend.Key{Owner: Owner(scope), Collection: Collection, ID: Hex(sha256.Sum256(b))}`,
		To: `	for _, s := range []string{tool, opID} {
		b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
		b = append(b, s...)
	}
	return backend.Key{Collection: Collection, ID: Hex(sha256.Sum256(b))}`,
		Pkg: "./store/memory",
		Run: "^TestConformance$/^Middleware$/^ScopesKeepOpsApart$",
	},
	{
		Name:   "idem/fingerprint-compare",
		Guards: "an op id sent again with other arguments is refused with key_reused",
		File:   "idem/middleware.go",
		From:   "return err == nil && fp == rec.Fingerprint",
		To:     `return err == nil && fp != ""`,
		Pkg:    "./store/memory",
		Run:    "^TestConformance$/^Middleware$/^KeyReused$",
	},
	{
		Name:   "idem/args-hash-compare",
		Guards: "only a byte-equal encoding of the arguments skips the fingerprint",
		File:   "idem/middleware.go",
		From:   `if rec.ArgsHash != "" && rec.ArgsHash == o.argsHash() {`,
		To:     `if rec.ArgsHash != "" {`,
		Pkg:    "./store/memory",
		Run:    "^TestConformance$/^Middleware$/^KeyReused$",
	},
	{
		Name:   "idem/key-utf8",
		Guards: "a record key that is not valid UTF-8 is refused, not decoded to U+FFFD and merged with another",
		File:   "idem/middleware.go",
		From:   "if !validUTF8String(raw) {",
		To:     "if false {",
		Pkg:    "./idem",
		Run:    "^TestInvalidUTF8KeysAndOpIDsRefused$",
	},
	// The fast paths (idem/fastpath.go) answer as the libraries do.
	{
		Name:   "idem/fast-check-integer",
		Guards: "the fast argument check is never sure of a fraction where the schema wants an integer",
		File:   "idem/fastpath.go",
		From:   "fraction = true",
		To:     "fraction = false",
		Pkg:    "./idem",
		Run:    "^FuzzFastCheck$",
	},
	{
		Name:   "idem/fast-check-type",
		Guards: "the fast argument check is never sure of a value of a type the schema does not allow",
		File:   "idem/fastpath.go",
		From: `		if !fs.allows(typeString) {
			return i, false
		}`,
		To:  "",
		Pkg: "./idem",
		Run: "^FuzzFastCheck$",
	},
	{
		Name:   "idem/fast-check-required",
		Guards: "the fast argument check is never sure of an object without a required property",
		File:   "idem/fastpath.go",
		From:   "return i + 1, seen&fs.required == fs.required",
		To:     "return i + 1, true",
		Pkg:    "./idem",
		Run:    "^FuzzFastCheck$",
	},
	{
		Name:   "idem/canonical-skip-op-id",
		Guards: "the fast canonical form leaves out the top-level op_id only, as the library path does",
		File:   "idem/fastpath.go",
		From:   `if depth > 0 || skip == "" || string(name) != skip {`,
		To:     `if skip == "" || string(name) != skip {`,
		Pkg:    "./idem",
		Run:    "^FuzzCanonical$",
	},
	{
		Name:   "idem/canonical-exact-integers",
		Guards: "the fast canonical form writes only the integers a double holds exactly",
		File:   "idem/fastpath.go",
		From:   "n == 0 || n > 15 ||",
		To:     "n == 0 || n > 17 ||",
		Pkg:    "./idem",
		Run:    "^FuzzCanonical$",
	},
	{
		Name:   "idem/canonical-duplicate-names",
		Guards: "the fast canonical form leaves an object with a duplicate name to the library",
		File:   "idem/fastpath.go",
		From:   "return out, i, false // a duplicate name",
		To:     "continue",
		Pkg:    "./idem",
		Run:    "^FuzzCanonical$",
	},
	{
		Name:   "idem/flights",
		Guards: "concurrent duplicates in one process wait for the first and replay it",
		File:   "idem/middleware.go",
		From:   "release, waited, err := t.fl.acquire(ctx, o.key, t.c.busyAfter)",
		To:     "release, waited, err := func() {}, false, error(nil)",
		Pkg:    "./store/memory",
		Run:    "^TestConformance$/^Middleware$/^Concurrent64SameOpID$",
	},

	// Side-effect markers.
	{
		Name:   "sideeffect/claim-only-pending",
		Guards: "only a pending marker can be claimed: one post under concurrent callers",
		File:   "sideeffect/once.go",
		From:   "func claimPending(d *doc, now time.Time, grace time.Duration) bool { return d.State == Pending }",
		To:     "func claimPending(d *doc, now time.Time, grace time.Duration) bool { return d.State != Done }",
		Pkg:    "./store/memory",
		Run:    "^TestConformance$/^SideEffect$/^(ConcurrentOncePostsOnce|SecondCallerDoesNotPost)$",
	},
	{
		Name:   "sideeffect/claim-update",
		Guards: "a claim is written at the version read, so two claimers that both read the marker pending post once even where only writes are checked",
		File:   "sideeffect/once.go",
		From: `		if err := tx.Update(ctx, k, v, d); err != nil {
			return fmt.Errorf("sideeffect: claiming marker: %w", err)`,
		To: `		if err := tx.Put(ctx, k, d); err != nil {
			return fmt.Errorf("sideeffect: claiming marker: %w", err)`,
		Pkg: "./store/memory",
		Run: "^TestConformance$/^SideEffect$/^ClaimIsAConditionalWrite$",
	},
	{
		Name:   "sideeffect/fenced-update",
		Guards: "a claim's complete, release or unknown is written at the version read, so a takeover after that read fences it",
		File:   "sideeffect/once.go",
		From:   "		if err := tx.Update(ctx, c.k, v, d); err != nil {",
		To:     "		_ = v\n		if err := tx.Put(ctx, c.k, d); err != nil {",
		Pkg:    "./store/memory",
		Run:    "^TestConformance$/^SideEffect$/^FencedWriteIsConditional$",
	},
	{
		Name:   "sideeffect/fencing-token",
		Guards: "a stale owner's late complete or release is refused while another owns the claim",
		File:   "sideeffect/once.go",
		From:   "if d.Token != c.token || (d.State != Claimed && d.State != Unknown) {",
		To:     "if d.State != Claimed && d.State != Unknown {",
		Pkg:    "./store/memory",
		Run:    "^TestConformance$/^SideEffect$/^Fencing$",
	},
	{
		Name:   "sideeffect/marker-create",
		Guards: "a marker is created only if absent: a repeated write does not reopen a done marker",
		File:   "sideeffect/intend.go",
		From:   "err = tx.Create(ctx, k, d)",
		To:     "err = tx.Put(ctx, k, d)",
		Pkg:    "./store/memory",
		Run:    "^TestConformance$/^SideEffect$/^RepeatedWritePostsOnce$",
	},
	{
		Name:   "sideeffect/payload-compare",
		Guards: "the same marker key with another payload is refused",
		File:   "sideeffect/intend.go",
		From:   "if cur.Fingerprint != d.Fingerprint {",
		To:     `if cur.Fingerprint == "" {`,
		Pkg:    "./store/memory",
		Run:    "^TestConformance$/^SideEffect$/^RepeatedWritePostsOnce$",
	},

	// Merge rules.
	{
		Name:   "merge/earliest",
		Guards: "Earliest keeps the earlier instant whatever the order",
		File:   "merge/rule.go",
		From: `func Earliest(a, b time.Time) time.Time {
	a, b = a.Round(0), b.Round(0)`,
		To: `func Earliest(a, b time.Time) time.Time {
	if true {
		return b.Round(0)
	}
	a, b = a.Round(0), b.Round(0)`,
		Pkg: "./store/memory",
		Run: "^TestConformance$/^Merge$",
	},
	{
		Name:   "merge/priority",
		Guards: "Priority keeps the higher-ranked value",
		File:   "merge/rule.go",
		From: `		case ra > rb:
			return a
		case rb > ra:
			return b`,
		To: `		case ra > rb:
			return b
		case rb > ra:
			return a`,
		Pkg: "./store/memory",
		Run: "^TestConformance$/^Merge$",
	},

	{
		Name:   "merge/apply-update",
		Guards: "Apply writes the merged record at the version it read, so concurrent merges lose nothing even where only writes are checked",
		File:   "merge/apply.go",
		From:   "	if err := tx.Update(ctx, key, v, after, write...); err != nil {",
		To:     "	_ = v\n	if err := tx.Put(ctx, key, after, write...); err != nil {",
		Pkg:    "./store/memory",
		Run:    "^TestConformance$/^Merge$/^ConcurrentApplyWritesConditionally$",
	},

	// The buffered transaction (idem/backend/kit) of the memory, DynamoDB
	// and Firestore stores: its conditions are caught on the memory store.
	{
		Name:   "kit/create-if-absent",
		Guards: "Create fails on a live document",
		File:   "idem/backend/kit/buffer.go",
		From: `	if live {
		return backend.ErrExists
	}`,
		To:  `	_ = live`,
		Pkg: "./store/memory",
		Run: "^TestConformance$/^Contract$/^(CreateGet|ConcurrentCreate)$",
	},
	{
		Name:   "kit/update-version",
		Guards: "Update writes only at the version read",
		File:   "idem/backend/kit/buffer.go",
		From: `	if cur != v {
		return backend.ErrConflict
	}
	b.setOpts(opts)`,
		To: `	if v < 0 && cur != v {
		return backend.ErrConflict
	}
	b.setOpts(opts)`,
		Pkg: "./store/memory",
		Run: "^TestConformance$/^Contract$/^Update$",
	},

	{
		Name:   "kit/delete-version",
		Guards: "Delete with a version removes the document only at that version",
		File:   "idem/backend/kit/buffer.go",
		From:   "	if v != 0 && cur != v {",
		To:     "	if v < 0 && cur != v {",
		Pkg:    "./store/memory",
		Run:    "^TestConformance$/^Contract$/^Delete$",
	},

	// The memory store.
	{
		Name:   "memory/read-expiry",
		Guards: "Read, which answers replays, reports an expired document as absent",
		File:   "store/memory/memory.go",
		From:   "	if !ok || !backend.Live(d.expires, s.opts.Now()) {",
		To:     "	if !ok {",
		Pkg:    "./store/memory",
		Run:    "^TestConformance$/^Reader$/^Read$",
	},
	{
		Name:   "memory/commit-reads-unchanged",
		Guards: "a transaction commits only if nothing it read changed",
		File:   "store/memory/memory.go",
		From: `	if t.staleLocked() {
		return errConflictCommit
	}
	// Check every write before applying any.`,
		To:  `	// Check every write before applying any.`,
		Pkg: "./store/memory",
		Run: "^TestConformance$/^Contract$/^RetryOnConflict$",
	},

	// SQLite.
	{
		Name:   "sqlite/create-if-absent",
		Guards: "the INSERT replaces only an expired row",
		File:   "store/sqlite/tx.go",
		From:   "WHERE docs.expires_at IS NOT NULL AND docs.expires_at <= ?`,",
		To:     "WHERE ? IS NOT NULL`,",
		Pkg:    "./store/sqlite",
		Run:    "^TestConformance$/^(Contract|Middleware)$/^(CreateGet|RepeatOnAnotherServer)$",
	},
	{
		Name:   "sqlite/update-version",
		Guards: "the UPDATE writes only at the version read",
		File:   "store/sqlite/tx.go",
		From:   "WHERE collection = ? AND id = ? AND version = ? AND (expires_at IS NULL OR expires_at > ?)`,",
		To:     "WHERE collection = ? AND id = ? AND (version = ? OR 1) AND (expires_at IS NULL OR expires_at > ?)`,",
		Pkg:    "./store/sqlite",
		Run:    "^TestConformance$/^Contract$/^Update$",
	},

	{
		Name:   "sqlite/delete-version",
		Guards: "the DELETE at a version deletes only the row at that version",
		File:   "store/sqlite/tx.go",
		From:   "WHERE collection = ? AND id = ? AND (? = 0 OR version = ?) AND (expires_at IS NULL OR expires_at > ?)`,",
		To:     "WHERE collection = ? AND id = ? AND (? = 0 OR version = ? OR 1) AND (expires_at IS NULL OR expires_at > ?)`,",
		Pkg:    "./store/sqlite",
		Run:    "^TestConformance$/^Contract$/^Delete$",
	},

	// PostgreSQL.
	{
		Name:   "postgres/on-conflict-expired-only",
		Guards: "ON CONFLICT replaces only an expired row",
		File:   "store/postgres/queries.go",
		From:   "WHERE d.expires_at IS NOT NULL AND d.expires_at <= $5",
		To:     "WHERE $5::timestamptz IS NOT NULL",
		Pkg:    "./store/postgres",
		Run:    "^TestConformance$/^(Contract|Middleware)$/^(CreateGet|RepeatOnAnotherServer)$",
		Needs:  postgres,
	},
	{
		Name:   "postgres/create-at-commit-guard",
		Guards: "a Create sent with the COMMIT fails the transaction when it wrote no row",
		File:   "store/postgres/queries.go",
		From:   "SELECT 1 / count(*) FROM w`",
		To:     "SELECT 1 / greatest(count(*), 1) FROM w`",
		Pkg:    "./store/postgres",
		Run:    "^TestConformance$/^(Reader|Middleware)$/^(CreateAtCommitNeverReplacesALiveDocument|RepeatOnAnotherServer)$",
		Needs:  postgres,
	},
	{
		Name:   "postgres/sweep-before-migrate",
		Guards: "a background sweep round before Migrate finds nothing to sweep, not a failure",
		File:   "store/postgres/postgres.go",
		From:   "kit.StartSweeping(s, (*Store).backgroundSweep,",
		To:     "kit.StartSweeping(s, (*Store).Sweep,",
		Pkg:    "./store/postgres",
		Run:    "^TestBackgroundSweepBeforeMigrate$",
		Needs:  postgres,
	},
	{
		Name:   "postgres/read-expiry",
		Guards: "Read, which answers replays, reports an expired document as absent",
		File:   "store/postgres/read.go",
		From:   "r.live = vals[2] == nil || backend.Live(timestamptz(vals[2]), now)",
		To:     "r.live = true",
		Pkg:    "./store/postgres",
		Run:    "^TestConformance$/^Reader$/^Read$",
		Needs:  postgres,
	},
	{
		Name:   "postgres/update-version",
		Guards: "the UPDATE writes only at the version read",
		File:   "store/postgres/queries.go",
		From:   "WHERE collection = $1 AND id = $2 AND version = $5 AND (expires_at IS NULL OR expires_at > $6)",
		To:     "WHERE collection = $1 AND id = $2 AND (version = $5 OR true) AND (expires_at IS NULL OR expires_at > $6)",
		Pkg:    "./store/postgres",
		Run:    "^TestConformance$/^Contract$/^Update$",
		Needs:  postgres,
	},

	{
		Name:   "postgres/delete-version",
		Guards: "the DELETE at a version deletes only the row at that version",
		File:   "store/postgres/queries.go",
		From:   "WHERE collection = $1 AND id = $2 AND ($3::bigint = 0 OR version = $3::bigint) AND (expires_at IS NULL OR expires_at > $4)",
		To:     "WHERE collection = $1 AND id = $2 AND ($3::bigint = 0 OR version = $3::bigint OR true) AND (expires_at IS NULL OR expires_at > $4)",
		Pkg:    "./store/postgres",
		Run:    "^TestConformance$/^Contract$/^Delete$",
		Needs:  postgres,
	},

	// DynamoDB.
	{
		Name:   "dynamo/create-at-commit-condition",
		Guards: "a Create sent with the commit replaces only a deleted or expired item",
		File:   "store/dynamo/tx.go",
		From:   `"attribute_not_exists(#k) OR ((attribute_exists(#d) OR #e <= :now) AND #v < :v)"`,
		To:     `"attribute_not_exists(#k) OR ((attribute_exists(#d) OR #e <= :now OR attribute_exists(#k)) AND #v < :v)"`,
		Pkg:    "./store/dynamo",
		Run:    "^TestConformance$/^(Reader|Middleware)$/^(CreateAtCommitNeverReplacesALiveDocument|RepeatOnAnotherServer)$",
		Needs:  dynamodb,
	},
	{
		Name:   "dynamo/read-condition",
		Guards: "every item a transaction read is unchanged at commit (its Put or ConditionCheck)",
		File:   "store/dynamo/tx.go",
		From:   `return aws.String("#v = :seen"), map[string]string{"#v": attrVersion},`,
		To:     `return aws.String("#v >= :seen"), map[string]string{"#v": attrVersion},`,
		Pkg:    "./store/dynamo",
		Run:    "^TestConformance$/^Contract$/^(RetryOnConflict|ConcurrentUpdate)$",
		Needs:  dynamodb,
	},
	{
		Name:   "dynamo/condition-check",
		Guards: "an item read and not written is checked unchanged at commit",
		File:   "store/dynamo/tx.go",
		From:   "cc.ConditionExpression, cc.ExpressionAttributeNames, cc.ExpressionAttributeValues = condition(r.Version)",
		To:     `cc.ConditionExpression, cc.ExpressionAttributeNames = aws.String("attribute_exists(#k) OR attribute_not_exists(#k)"), map[string]string{"#k": attrKey}`,
		Pkg:    "./store/dynamo",
		Run:    "^TestConformance$/^Consistency$/^NoWriteSkew$",
		Needs:  dynamodb,
	},

	{
		Name:   "dynamo/blind-write-version",
		Guards: "a write of an item not read goes out only above the stored version, so versions rise past another process's clock",
		File:   "store/dynamo/tx.go",
		From:   `put.ConditionExpression = aws.String("attribute_not_exists(#k) OR #v < :v")`,
		To:     `put.ConditionExpression = aws.String("attribute_not_exists(#k) OR #v < :v OR attribute_exists(#k)")`,
		Pkg:    "./store/dynamo",
		Run:    "^TestBlindWriteRisesPastAnotherProcess$",
		Needs:  dynamodb,
	},
	{
		Name:   "dynamo/read-expiry",
		Guards: "Read, which answers replays, reports an expired item as absent",
		File:   "store/dynamo/dynamo.go",
		From: `	if !it.live(s.opts.Now()) {
		return 0, backend.ErrNotFound
	}
	return it.version, it.decode(k, dst)`,
		To: `	if false {
		return 0, backend.ErrNotFound
	}
	return it.version, it.decode(k, dst)`,
		Pkg:   "./store/dynamo",
		Run:   "^TestConformance$/^Reader$/^Read$",
		Needs: dynamodb,
	},

	// Firestore.
	{
		Name:   "firestore/create-at-commit-live",
		Guards: "a Create sent with the commit fails over a live document",
		File:   "store/firestore/tx.go",
		From:   "			if ds[i].Live(t.s.opts.Now()) {\n",
		To:     "			if false {\n",
		Pkg:    "./store/firestore",
		Run:    "^TestConformance$/^(Reader|Middleware)$/^(CreateAtCommitNeverReplacesALiveDocument|RepeatOnAnotherServer)$",
		Needs:  firestore,
	},
	{
		Name:   "firestore/reads-unchanged",
		Guards: "the documents fn read and does not write are read again in the transaction and must be unchanged",
		File:   "store/firestore/tx.go",
		From:   "if ds[i].Version != t.ReadOf(k).Version {",
		To:     "if (ds[i].Version == 0) != (t.ReadOf(k).Version == 0) {",
		Pkg:    "./store/firestore",
		Run:    "^TestConformance$/^Consistency$/^NoWriteSkew$",
		Needs:  firestore,
	},
	{
		Name:   "firestore/update-precondition",
		Guards: "a document fn read and writes goes out with the update time read as its precondition",
		File:   "store/firestore/tx.go",
		From: `				{Path: FieldWrittenAt, Value: fs.ServerTimestamp},
			}, fs.LastUpdateTime(updateTime(r.Version)))`,
		To: `				{Path: FieldWrittenAt, Value: fs.ServerTimestamp},
			})`,
		Pkg:   "./store/firestore",
		Run:   "^TestConformance$/^Contract$/^(RetryOnConflict|ConcurrentUpdate)$",
		Needs: firestore,
	},
	{
		Name:   "firestore/delete-precondition",
		Guards: "the Delete of a document fn read goes out with the update time read as its precondition",
		File:   "store/firestore/tx.go",
		From:   "			err = t.ftx.Delete(ref, fs.LastUpdateTime(updateTime(r.Version)))",
		To:     "			err = t.ftx.Delete(ref)",
		Pkg:    "./store/firestore",
		Run:    "^TestConformance$/^Contract$/^DeleteOnConflict$",
		Needs:  firestore,
	},
	{
		Name:   "firestore/read-expiry",
		Guards: "Read, which answers replays, reports an expired document as absent",
		File:   "store/firestore/firestore.go",
		From: `	if !d.Live(s.opts.Now()) {
		return 0, backend.ErrNotFound
	}
	if err := unmarshal(k, d.Data, dst); err != nil {`,
		To: `	if false {
		return 0, backend.ErrNotFound
	}
	if err := unmarshal(k, d.Data, dst); err != nil {`,
		Pkg:   "./store/firestore",
		Run:   "^TestConformance$/^Reader$/^Read$",
		Needs: firestore,
	},
	{
		Name:   "firestore/create-precondition",
		Guards: "a document fn read as absent and writes goes out as a Create, which fails if one has come since",
		File:   "store/firestore/tx.go",
		From:   "			err = t.ftx.Create(ref, fields(w))",
		To:     "			err = t.ftx.Set(ref, fields(w))",
		Pkg:    "./store/firestore",
		Run:    "^TestConformance$/^(Contract|Middleware)$/^(ConcurrentCreate|ConcurrentAcrossServers)$",
		Needs:  firestore,
	},
	// Expiry sweeps: every expired document, in small batches.
	{
		Name:   "postgres/sweep-look-again",
		Guards: "a sweep that ran out past its position looks once more from the earliest expiry, for documents written later with an earlier one",
		File:   "store/postgres/postgres.go",
		From: `			if fromStart {
				break
			}
			from, fromStart = sweepStart, true`,
		To:    "			_ = fromStart\n			break",
		Pkg:   "./store/postgres",
		Run:   "^TestConformance$/^Contract$/^SweepManyBatches$",
		Needs: postgres,
	},
	{
		Name:   "idem/op-id-hashed",
		Guards: "logs and spans carry a hash of the op id, never the op id, which reads the stored answer within its scope",
		File:   "idem/telemetry.go",
		From:   "		opHash = hashOpID(o.id)",
		To:     "		opHash = o.id",
		Pkg:    "./idem",
		Run:    "^TestTelemetryFirstReplayRefusal$",
	},
	{
		Name:   "idem/tool-error-span-status",
		Guards: "a call answered with isError is an error to its span, which HTTP and JSON-RPC monitoring count as a success",
		File:   "idem/telemetry.go",
		From:   "			span.SetStatus(codes.Error, string(code))",
		To:     "			_ = codes.Error",
		Pkg:    "./idem",
		Run:    "^TestTelemetry(FirstReplayRefusal|ToolErrorContention)$",
	},
	{
		Name:   "sqlite/sweep-batch",
		Guards: "a sweep holds SQLite's only writer for one small batch at a time",
		File:   "store/sqlite/sqlite.go",
		From:   "		n := min(sweepBatch, limit-total)",
		To:     "		n := limit - total",
		Pkg:    "./store/sqlite",
		Run:    "^TestSweepTransactionsAreSmall$",
	},
	{
		Name:   "sqlite/sweep-runs-first",
		Guards: "a Run waiting for SQLite's writer goes before the next sweep batch",
		File:   "store/sqlite/sqlite.go",
		From:   "		if s.waiting.Load() == 0 {",
		To:     "		if true {",
		Pkg:    "./store/sqlite",
		Run:    "^TestRunsGoBeforeSweepBatches$",
	},
	{
		Name:   "sqlite/sweep-checkpoint",
		Guards: "a sweep, whose commits do not checkpoint, checkpoints the WAL itself so that it stays small",
		File:   "store/sqlite/sqlite.go",
		From:   "	if due || deleted < n {",
		To:     "	if false {",
		Pkg:    "./store/sqlite",
		Run:    "^TestSweepKeepsTheWALSmall$",
	},
	{
		Name:   "postgres/sweep-rests",
		Guards: "a PostgreSQL sweep rests between batches while calls of its store are in progress",
		File:   "store/postgres/postgres.go",
		From:   "	if d <= 0 || s.calls.Load() == 0 {",
		To:     "	if true {",
		Pkg:    "./store/postgres",
		Run:    "^TestSweepRestsWhileCallsRun$",
		Needs:  postgres,
	},
	{
		Name:   "memory/sweep-latest-write",
		Guards: "the memory store's sweep deletes a document it found expired only if it still is",
		File:   "store/memory/memory.go",
		From:   "if d, ok := s.docs[k]; ok && !backend.Live(d.expires, now) {",
		To:     "if _, ok := s.docs[k]; ok {",
		Pkg:    "./store/memory",
		Run:    "^TestConformance$",
	},
	// The examples' keys for a model's retry (docs/model-retry.md): each
	// caught by a model's retry over HTTP after a lost answer.
	{
		Name:   "focus/set-steps-replace",
		Guards: "set_steps replaces a device's count for the day, so a model's retry with a new op id adds nothing",
		File:   "examples/focus/server.go",
		From:   "d.DeviceSteps[in.Device] = in.Steps",
		To:     "d.DeviceSteps[in.Device] += in.Steps",
		Pkg:    "./examples/focus",
		Run:    "^TestModelRetryOverHTTP$/^memory$/^set_steps$",
	},
	{
		Name:   "focus/stop-keyed-by-device",
		Guards: "a stop is kept under its device, so a device's retry with a new op id or summary is the same stop",
		File:   "examples/focus/server.go",
		From:   `stopKey := "device:" + in.Device` + "\n",
		To:     `stopKey := "device:" + in.Device + "@" + f.now().String()` + "\n",
		Pkg:    "./examples/focus",
		Run:    "^TestModelRetryOverHTTP$/^memory$/^end_focus_session_id$",
	},
	{
		Name:   "focus/earliest-stop",
		Guards: "of a device's two stops the earlier stands, so a later retry changes nothing",
		File:   "examples/focus/stop.go",
		From:   "switch a.At.Compare(b.At) {",
		To:     "switch b.At.Compare(a.At) {",
		Pkg:    "./examples/focus",
		Run:    "^TestModelRetryOverHTTP$/^memory$/^end_focus_session_id$",
	},
	{
		Name:   "focus/log-overlap",
		Guards: "a log whose time overlaps another log_id's is refused, so a model's retry under a new log_id counts nothing",
		File:   "examples/focus/server.go",
		From:   "if id != in.LogID && o.StartedAt.Before(lt.end()) && lt.StartedAt.Before(o.end()) {",
		To:     "if false {",
		Pkg:    "./examples/focus",
		Run:    "^(TestModelRetryOverHTTP|TestLogOverlap)$",
	},
	{
		Name:   "focus/owner-is-device",
		Guards: "a stop without an id acts only on the session running on the caller's device",
		File:   "examples/focus/server.go",
		From:   `if device != "" && e.Device == device {`,
		To:     `if true {`,
		Pkg:    "./examples/focus",
		Run:    "^TestNoIDIsRefusedWithCandidates$/^memory$",
	},
	{
		Name:   "stories/edit-revision",
		Guards: "an edit with another body, based on a revision the story moved past, is refused, so a model's reworded retry adds no revision",
		File:   "examples/stories/stories.go",
		From:   "	case in.Revision < last.N:",
		To:     "	case false:",
		Pkg:    "./examples/stories",
		Run:    "^(TestModelRetry|TestEditRevision|TestEditStorm)$/^memory$",
	},
	// The background sweep: it runs without being asked, stops when it is
	// turned off or its store is closed, and never keeps its store alive.
	{
		Name:   "kit/sweep-starts",
		Guards: "a store that can sweep sweeps in the background, with nothing calling Sweep",
		File:   "idem/backend/kit/sweep.go",
		From:   "	if o.Off {\n		return nil\n	}",
		To:     "	if true {\n		return nil\n	}",
		Pkg:    "./store/memory",
		Run:    "^TestBackgroundSweepReclaims$",
	},
	{
		Name:   "kit/sweep-off",
		Guards: "NoSweep turns the background sweep off",
		File:   "idem/backend/kit/sweep.go",
		From:   "	if o.Off {\n		return nil\n	}",
		To:     "	if false {\n		return nil\n	}",
		Pkg:    "./store/memory",
		Run:    "^TestBackgroundSweep$/^Off$",
	},
	{
		Name:   "kit/sweep-holds-store-weakly",
		Guards: "the background sweep holds its store only during a round, so a store dropped without Close is collected and its sweep ends",
		File:   "idem/backend/kit/sweep.go",
		From:   "	go sweepLoop(ctx, s, weak.Make(owner), sweep, o, p)",
		To:     "	go func() { defer runtime.KeepAlive(owner); sweepLoop(ctx, s, weak.Make(owner), sweep, o, p) }()",
		Pkg:    "./idem/backend/kit",
		Run:    "^TestSweepingEndsWithItsStore$",
	},
	{
		Name:   "sqlite/close-stops-sweep",
		Guards: "Close stops the SQLite store's background sweep",
		File:   "store/sqlite/sqlite.go",
		From:   "	s.background.Stop()\n",
		To:     "\n",
		Pkg:    "./store/sqlite",
		Run:    "^TestBackgroundSweep$/^On$",
	},
	// The example servers' limits over HTTP (examples/internal/exserve):
	// what keeps one user's flood from stalling another's calls.
	{
		Name:   "exserve/max-body",
		Guards: "a request body above -max-body is refused with 413 before any of it runs",
		File:   "examples/internal/exserve/limits.go",
		From:   "b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))",
		To:     "b, err := io.ReadAll(r.Body)",
		Pkg:    "./examples/internal/exserve",
		Run:    "^TestBodyLimit$",
	},
	{
		Name:   "exserve/max-batch",
		Guards: "a JSON-RPC batch above -max-batch is refused whole",
		File:   "examples/internal/exserve/limits.go",
		From:   "if l.MaxBatch > 0 && n > l.MaxBatch {",
		To:     "if false && n > l.MaxBatch {",
		Pkg:    "./examples/internal/exserve",
		Run:    "^TestBatchLimit$",
	},
	{
		Name:   "exserve/calls-per-user",
		Guards: "a user with -max-calls calls in progress waits for a slot, or is refused when as many wait",
		File:   "examples/internal/exserve/limits.go",
		From:   "if u.running+n <= g.max {",
		To:     "if true {",
		Pkg:    "./examples/internal/exserve",
		Run:    "^TestCallsPerUser$",
	},
	{
		Name:   "exserve/read-timeout",
		Guards: "a body trickled slower than -read-timeout is answered 408",
		File:   "examples/internal/exserve/exserve.go",
		From:   "ReadTimeout:       l.ReadTimeout,",
		To:     "ReadTimeout:       0,",
		Pkg:    "./examples/internal/exserve",
		Run:    "^TestSlowBodyTimesOut$",
	},
	{
		Name:   "exserve/write-timeout",
		Guards: "an answer not written within -write-timeout is cut off",
		File:   "examples/internal/exserve/exserve.go",
		From:   "WriteTimeout:      l.WriteTimeout,",
		To:     "WriteTimeout:      0,",
		Pkg:    "./examples/internal/exserve",
		Run:    "^TestWriteTimeoutCutsAnswer$",
	},
	{
		Name:   "exserve/idle-timeout",
		Guards: "a kept-alive connection idle for -idle-timeout is closed",
		File:   "examples/internal/exserve/exserve.go",
		From:   "IdleTimeout:       l.IdleTimeout,",
		To:     "IdleTimeout:       0,",
		Pkg:    "./examples/internal/exserve",
		Run:    "^TestIdleConnectionCloses$",
	},
	{
		Name:   "exserve/www-authenticate",
		Guards: "a 401 carries a Bearer challenge",
		File:   "examples/internal/exserve/exserve.go",
		From:   "w.Header().Set(\"WWW-Authenticate\", `Bearer realm=\"mcp\"`)",
		To:     "_ = w",
		Pkg:    "./examples/internal/exserve",
		Run:    "^TestHandlerNeedsAToken$",
	},
	{
		Name:   "exserve/listen-exempt",
		Guards: "a subscriptions/listen stream is not cut by the write timeout and holds no call slot",
		File:   "examples/internal/exserve/limits.go",
		From:   `if method == "subscriptions/listen" {`,
		To:     `if method == "subscriptions/listen" && false {`,
		Pkg:    "./examples/internal/exserve",
		Run:    "^TestListenStreamOutlivesLimits$",
	},
	// The adapters: what each reads from its library's request and result.
	{
		Name:   "gosdk/authenticated",
		Guards: "a go-sdk caller with a token but no user id is refused an op id, not given the shared empty scope",
		File:   "idem/gosdk.go",
		From:   "c.Authenticated, c.User = true, e.TokenInfo.UserID",
		To:     "c.User = e.TokenInfo.UserID",
		Pkg:    "./idem",
		Run:    "^(TestTokenWithoutUserIDIsRefused|TestStatusRefusalTable)$",
	},
	{
		Name:   "gosdk/error-result-not-kept",
		Guards: "a go-sdk handler's isError result rolls its writes back and is not stored",
		File:   "idem/gosdk.go",
		From:   "		r.ErrorCode = CodeNotSaved\n",
		To:     "		r.ErrorCode = \"\"\n",
		Pkg:    "./store/memory",
		Run:    "^TestConformance$/^Middleware$/^RollbackOn_iserror$",
	},
	{
		Name:   "mcpgo/authenticated",
		Guards: "an mcp-go call over HTTP with credentials and no Scope is refused an op id, not given the shared empty scope",
		File:   "idem/mcpgo/mcpgo.go",
		From:   `c.Authenticated = req.Header.Get("Authorization") != ""`,
		To:     "c.Authenticated = false",
		Pkg:    "./idem/mcpgo",
		Run:    "^TestScopeOverHTTP$",
	},
	{
		Name:   "mcpgo/error-result-not-kept",
		Guards: "an mcp-go handler's isError result rolls its writes back and is not stored",
		File:   "idem/mcpgo/mcpgo.go",
		From:   "		r.ErrorCode = idem.CodeNotSaved\n",
		To:     "		r.ErrorCode = \"\"\n",
		Pkg:    "./idem/mcpgo",
		Run:    "^TestHandlerErrorsAreNotSaved$",
	},
	{
		Name:   "idem/op-record-create-mcpgo",
		Guards: "the same create-if-absent, through the mcp-go adapter: a repeat on another mcp-go server replays",
		File:   "idem/middleware.go",
		From:   "return tx.Create(ctx, o.key, rec, backend.WithExpiry(rec.ExpiresAt), backend.CreateAtCommit())",
		To:     "return tx.Put(ctx, o.key, rec, backend.WithExpiry(rec.ExpiresAt), backend.CreateAtCommit())",
		Pkg:    "./idem/mcpgo",
		Run:    "^TestMiddlewareOnMemory$/^(RepeatOnAnotherServer|ConcurrentAcrossServers)$",
	},
	{
		Name:   "mcpgo/meta-op-id",
		Guards: "an mcp-go call's op id in _meta reaches the middleware: its repeat replays",
		File:   "idem/mcpgo/mcpgo.go",
		From:   "c.Meta = m.AdditionalFields",
		To:     "_ = m",
		Pkg:    "./idem/mcpgo",
		Run:    "^TestMiddlewareOnMemory$/^(SameOpIDTwice|DifferentOpsOnOneRecordLoseNothing)$",
	},
	{
		Name:   "idem/args-last-duplicate",
		Guards: "of duplicate op_id members the last is the op id, as the schema check reads the arguments",
		File:   "idem/opid.go",
		From:   "for i := len(m) - 1; i >= 0; i-- {",
		To:     "for i := range m {",
		Pkg:    "./idem",
		Run:    "^(TestLastOfDuplicateOpIDs|FuzzParseArgs)$",
	},
	{
		Name:   "oprecord/decode-fallback",
		Guards: "an op record segmentio's decoder refuses is decoded as encoding/json decodes it",
		File:   "internal/oprecord/decode.go",
		From:   "\t*r = saved\n\treturn json.Unmarshal(data, (*plain)(r))",
		To:     "\t*r = saved\n\t_ = json.Unmarshal // the import kept\n\treturn sjson.Unmarshal(data, (*plain)(r))",
		Pkg:    "./internal/oprecord",
		Run:    "^(TestUnmarshalJSONAsEncodingJSON|FuzzRecordUnmarshalJSON)$",
	},
	{
		Name:   "idem/args-nesting-limit",
		Guards: "arguments nested deeper than encoding/json reads are refused before the fast check and the handler",
		File:   "idem/opid.go",
		From:   "if !json.Valid(args) { // encoding/json's",
		To:     "if !sjson.Valid(args) { // encoding/json's",
		Pkg:    "./idem",
		Run:    "^(TestParseArgsDeepNesting|TestDeeplyNestedArgumentsAreRefused)$",
	},
	// The Guard: a claim created only where there is no record, settled
	// only by its owner, kept per scope, and an unknown outcome never run
	// again by itself.
	{
		Name:   "guard/claim-if-absent",
		Guards: "a guarded call claims its operation only when no record is there: a repeat replays the answer",
		File:   "idem/claim.go",
		From:   "\t\t_, err := tx.Get(ctx, o.key, rec)\n\t\tif errors.Is(err, ErrNotFound) {",
		To:     "\t\t_, err := tx.Get(ctx, o.key, rec)\n\t\tif err == nil || errors.Is(err, ErrNotFound) {",
		Pkg:    "./idem",
		Run:    "^(TestGuardLostAnswer|TestGuardConcurrentIdenticalCalls)$",
	},
	{
		Name:   "guard/settle-fenced",
		Guards: "a claim is settled only by the call that holds it: a slow owner's late answer is fenced off",
		File:   "idem/claim.go",
		From:   `if rec.State == "" || rec.Token != token {`,
		To:     `if rec.State == "" {`,
		Pkg:    "./idem",
		Run:    "^TestGuardSlowOwnerFenced$",
	},
	{
		Name:   "guard/scope-in-key",
		Guards: "a guarded operation is kept per scope: one user never gets another's answer",
		File:   "idem/claim.go",
		From:   "o.key = oprecord.Key(o.scope, c.Tool, o.ident)",
		To:     `o.key = oprecord.Key("", c.Tool, o.ident)`,
		Pkg:    "./idem",
		Run:    "^TestGuardScopesKeepOperationsApart$",
	},
	{
		Name:   "guard/upstream-key-scope",
		Guards: "the key sent upstream holds the scope: two users' operations never share one",
		File:   "idem/claim.go",
		From:   "o.upstream = upstreamKey(o.scope, c.Tool, o.ident)",
		To:     `o.upstream = upstreamKey("", c.Tool, o.ident)`,
		Pkg:    "./idem",
		Run:    "^TestGuardScopesKeepOperationsApart$",
	},
	{
		Name:   "guard/failure-unknown",
		Guards: "a failed guarded call that did not say NotDone is an unknown outcome, never run again by a repeat",
		File:   "idem/claim.go",
		From:   `case r.err != nil || r.ErrorCode != "":`,
		To:     `case r.err != nil:`,
		Pkg:    "./idem",
		Run:    "^TestGuardUnknownOutcomeSettled$",
	},
	{
		Name:   "guard/not-done-released",
		Guards: "a guarded call that failed with NotDone releases its claim: a retry runs",
		File:   "idem/claim.go",
		From:   "case r.NotDone || r.Transient:",
		To:     "case r.Transient:",
		Pkg:    "./idem",
		Run:    "^TestGuardIdempotencyKey$",
	},
	{
		Name:   "guard/reconcile-within-lease",
		Guards: "a reconcile that finds nothing within the claim's lease leaves the outcome unknown: the call may still be in flight",
		File:   "idem/claim.go",
		From:   "case errors.Is(err, ErrNotDone) && rec.LeaseUntil != nil && g.c.now().Before(*rec.LeaseUntil):",
		To:     "case false:",
		Pkg:    "./idem",
		Run:    "^TestGuardReconcileNotDone$",
	},
	{
		Name:   "gosdk/authorization-header",
		Guards: "a go-sdk caller that sends an Authorization header the server checks on its own counts as authenticated: without a scope it is refused, not given the empty scope that every such caller would share",
		File:   "idem/gosdk.go",
		From:   `case e.Header.Get("Authorization") != "":`,
		To:     `case false:`,
		Pkg:    "./idem",
		Run:    "^TestGuardOwnAuthNeedsAScope$",
	},
	{
		Name:   "guard/only-when",
		Guards: "a tool guarded OnlyWhen runs its other calls as without the guard: an update without the create's key is not refused",
		File:   "idem/guard.go",
		From:   "\tif c.onlyArg == \"\" {\n\t\treturn true\n\t}\n\traw, ok := named.get(c.onlyArg)",
		To:     "\tif true {\n\t\treturn true\n\t}\n\traw, ok := named.get(c.onlyArg)",
		Pkg:    "./idem",
		Run:    "^TestGuardOnlyWhen$",
	},
	{
		Name:   "transport/refused-is-not-done",
		Guards: "with HTTPEffects, a failed call whose requests were all refused (422) is released: a retry runs",
		File:   "idem/claim.go",
		From:   "r.NotDone = true // no request of it can have acted (Options.HTTPEffects)",
		To:     "_ = r // no request of it can have acted (Options.HTTPEffects)",
		Pkg:    "./idem",
		Run:    "^TestGuardHTTPEffects$",
	},
	{
		Name:   "transport/may-have-acted",
		Guards: "with HTTPEffects, a request that may have acted (502, 409) leaves the outcome unknown: never posted again",
		File:   "idem/transport.go",
		From:   "\tif !refused {\n\t\ttr.mu.Lock()",
		To:     "\tif false {\n\t\ttr.mu.Lock()",
		Pkg:    "./idem",
		Run:    "^TestGuardHTTPEffects$",
	},
	{
		Name:   "transport/unreached-is-not-done",
		Guards: "with HTTPEffects, a request that never reached the API (connection refused) did not act",
		File:   "idem/transport.go",
		From:   "\t\trefused = true // it never reached the API",
		To:     "\t\trefused = false // it never reached the API",
		Pkg:    "./idem",
		Run:    "^TestGuardHTTPEffects$",
	},
}
