import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * Wallets and their ledger. The Wallet entity is the only writer, but the database still refuses what must never
 * happen, whoever writes: a negative balance, an idempotency key charged twice, a ledger that does not add up.
 * Amounts are integer micro-credits.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE wallets (
      user_id text PRIMARY KEY REFERENCES users (id),
      balance bigint NOT NULL DEFAULT 0 CHECK (balance >= 0),
      seq bigint NOT NULL DEFAULT 0,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
  // Append-only. `seq` numbers a wallet's entries 1, 2, 3...; each row carries the balance after it, and the chain
  // trigger below checks balance_after = previous balance_after + amount, so the rows always sum to the balance.
  yield* sql`
    CREATE TABLE ledger_entries (
      user_id text NOT NULL REFERENCES wallets (user_id),
      seq bigint NOT NULL CHECK (seq > 0),
      amount bigint NOT NULL,
      kind text NOT NULL,
      scope text NOT NULL,
      idempotency_key text NOT NULL,
      app_id text,
      event text,
      metadata jsonb,
      description text,
      balance_after bigint NOT NULL CHECK (balance_after >= 0),
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (user_id, seq),
      UNIQUE (scope, idempotency_key)
    )`
  yield* sql`CREATE INDEX ledger_entries_app_day ON ledger_entries (user_id, app_id, created_at) WHERE app_id IS NOT NULL`
  yield* sql.unsafe(`
    CREATE FUNCTION ledger_chain() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE previous bigint;
    BEGIN
      IF NEW.seq = 1 THEN
        previous := 0;
      ELSE
        SELECT balance_after INTO previous FROM ledger_entries WHERE user_id = NEW.user_id AND seq = NEW.seq - 1;
      END IF;
      IF previous IS NULL OR NEW.balance_after <> previous + NEW.amount THEN
        RAISE EXCEPTION 'ledger chain broken for % at seq %', NEW.user_id, NEW.seq USING ERRCODE = 'check_violation';
      END IF;
      RETURN NEW;
    END $$`)
  yield* sql`CREATE TRIGGER ledger_chain BEFORE INSERT ON ledger_entries FOR EACH ROW EXECUTE FUNCTION ledger_chain()`
  yield* sql.unsafe(`
    CREATE FUNCTION ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION 'ledger entries are append-only' USING ERRCODE = 'restrict_violation';
    END $$`)
  yield* sql`
    CREATE TRIGGER ledger_append_only BEFORE UPDATE OR DELETE ON ledger_entries
    FOR EACH ROW EXECUTE FUNCTION ledger_append_only()`
  // At commit: the wallet's balance is the balance after its newest entry, and no entry lies beyond it.
  yield* sql.unsafe(`
    CREATE FUNCTION wallet_matches_ledger() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE w wallets%ROWTYPE; last_balance bigint; last_seq bigint;
    BEGIN
      SELECT * INTO w FROM wallets WHERE user_id = NEW.user_id;
      SELECT seq, balance_after INTO last_seq, last_balance FROM ledger_entries
        WHERE user_id = NEW.user_id ORDER BY seq DESC LIMIT 1;
      IF COALESCE(last_seq, 0) <> w.seq OR COALESCE(last_balance, 0) <> w.balance THEN
        RAISE EXCEPTION 'wallet % does not match its ledger', NEW.user_id USING ERRCODE = 'check_violation';
      END IF;
      RETURN NULL;
    END $$`)
  yield* sql`
    CREATE CONSTRAINT TRIGGER wallet_matches_ledger AFTER INSERT OR UPDATE ON wallets
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION wallet_matches_ledger()`
  yield* sql`
    CREATE CONSTRAINT TRIGGER ledger_matches_wallet AFTER INSERT ON ledger_entries
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION wallet_matches_ledger()`

  yield* sql`
    CREATE TABLE apps (
      id text PRIMARY KEY,
      owner_id text NOT NULL REFERENCES users (id),
      name text NOT NULL,
      client_id text NOT NULL UNIQUE,
      client_secret_hash text NOT NULL,
      redirect_uris jsonb NOT NULL,
      daily_cap_per_user bigint CHECK (daily_cap_per_user IS NULL OR daily_cap_per_user >= 0),
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX apps_owner ON apps (owner_id, created_at)`
  yield* sql`
    CREATE TABLE meters (
      id text PRIMARY KEY,
      app_id text NOT NULL REFERENCES apps (id),
      event_name text NOT NULL,
      credits_per_use bigint NOT NULL CHECK (credits_per_use >= 0),
      disabled boolean NOT NULL DEFAULT false,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (app_id, event_name)
    )`
  // Refresh tokens rotate; every token of one authorization shares a family, and reuse of a rotated one revokes it.
  yield* sql`
    CREATE TABLE oauth_refresh_tokens (
      token_hash text PRIMARY KEY,
      family_id text NOT NULL,
      app_id text NOT NULL REFERENCES apps (id),
      user_id text NOT NULL REFERENCES users (id),
      scope text NOT NULL,
      expires_at timestamptz NOT NULL,
      rotated_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`
    CREATE TABLE oauth_families (
      id text PRIMARY KEY,
      app_id text NOT NULL REFERENCES apps (id),
      user_id text NOT NULL REFERENCES users (id),
      revoked_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`
    CREATE TABLE payment_orders (
      id text PRIMARY KEY,
      user_id text NOT NULL REFERENCES users (id),
      amount bigint NOT NULL CHECK (amount > 0),
      status text NOT NULL CHECK (status IN ('pending', 'paid')),
      provider text,
      created_at timestamptz NOT NULL DEFAULT now(),
      paid_at timestamptz
    )`
})
