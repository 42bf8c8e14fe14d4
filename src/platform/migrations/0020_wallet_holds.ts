import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * Holds on wallets (issue 45 item 2, docs/billing.md "Holds"): a run or a session turn reserves credits when it
 * starts, charges against the reservation without asking the wallet, and posts what it used (its steps' ledger
 * entries) and releases the rest when it ends, as TigerBeetle's pending transfers or a card's authorisation hold.
 *
 * The wallet entity is the one writer of both tables, as of the ledger; the database still refuses what must never
 * happen: a wallet holding more than it has (`held <= balance`, so available = balance - held is never negative),
 * a hold of nothing, and a wallet whose `held` is not the sum of its holds (checked at commit).
 *
 * A hold lives until its run posts or voids it, or until `expires_at`: the wallet entity ignores an expired hold, and
 * removes expired holds when it starts (a run killed with its runner leaves its hold behind only until then).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE wallets ADD COLUMN held bigint NOT NULL DEFAULT 0`
  yield* sql`ALTER TABLE wallets ADD CONSTRAINT wallets_held_within_balance CHECK (held >= 0 AND held <= balance)`
  yield* sql`
    CREATE TABLE wallet_holds (
      user_id text NOT NULL REFERENCES wallets (user_id),
      -- the run's or turn's own key (its charges' key prefix): the same hold however often it is asked for
      hold_id text NOT NULL,
      amount bigint NOT NULL CHECK (amount > 0),
      expires_at timestamptz NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (user_id, hold_id)
    )`
  // At commit: a wallet's `held` is what its holds add up to, whichever of the two a statement changed.
  yield* sql.unsafe(`
    CREATE FUNCTION wallet_held_matches_holds() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE w_held bigint; total bigint; uid text;
    BEGIN
      uid := COALESCE(NEW.user_id, OLD.user_id);
      SELECT held INTO w_held FROM wallets WHERE user_id = uid;
      SELECT COALESCE(SUM(amount), 0) INTO total FROM wallet_holds WHERE user_id = uid;
      IF w_held IS NOT NULL AND w_held <> total THEN
        RAISE EXCEPTION 'wallet % holds % but its holds add up to %', uid, w_held, total USING ERRCODE = 'check_violation';
      END IF;
      RETURN NULL;
    END $$`)
  yield* sql`
    CREATE CONSTRAINT TRIGGER wallet_held_matches_holds AFTER UPDATE OF held ON wallets
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION wallet_held_matches_holds()`
  yield* sql`
    CREATE CONSTRAINT TRIGGER holds_match_wallet AFTER INSERT OR UPDATE OR DELETE ON wallet_holds
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION wallet_held_matches_holds()`
})
