// Work that runs one at a time per name, in the order asked: a template's build, seal, unseal and drop
// (templates.ts), a database's snapshot and restore while new connects to it wait (router.ts). A
// failure ends only its own turn; the next runs regardless.

export class NameQueue {
  /** Per name, the end of the last turn asked for (settled, never rejected). */
  private readonly tails = new Map<string, Promise<unknown>>();

  /** Runs `work` after every earlier turn for `name` has settled. */
  run<T>(name: string, work: () => Promise<T>): Promise<T> {
    const mine = (this.tails.get(name) ?? Promise.resolve()).catch(() => undefined).then(work);
    const tail = mine.catch(() => undefined);
    this.tails.set(name, tail);
    void tail.then(() => {
      if (this.tails.get(name) === tail) this.tails.delete(name);
    });
    return mine;
  }

  /** Settles when the turns for `name` asked for so far are done; undefined when there are none. */
  pending(name: string): Promise<unknown> | undefined {
    return this.tails.get(name);
  }
}
