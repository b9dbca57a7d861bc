// Names keyed by a time, earliest first: a binary min-heap with each name's place in it kept, so a
// name's time is set, moved or removed in O(log n) and the due ones are taken from the top. The
// janitor's deadlines (expiries.ts) live in two of these, so a pass costs what is due, not what exists.

export class DeadlineQueue {
  private readonly names: string[] = [];
  private readonly times: number[] = [];
  /** Each name's index in the heap arrays. */
  private readonly at = new Map<string, number>();

  get size(): number {
    return this.names.length;
  }

  /** The time `name` is due, or undefined when it is not queued. */
  get(name: string): number | undefined {
    const i = this.at.get(name);
    return i === undefined ? undefined : this.times[i];
  }

  /** Queues `name` at `time`, or moves it there. */
  set(name: string, time: number): void {
    const i = this.at.get(name);
    if (i === undefined) {
      this.names.push(name);
      this.times.push(time);
      this.at.set(name, this.names.length - 1);
      this.up(this.names.length - 1);
    } else if (this.times[i] !== time) {
      const earlier = time < this.times[i]!;
      this.times[i] = time;
      if (earlier) this.up(i);
      else this.down(i);
    }
  }

  delete(name: string): void {
    const i = this.at.get(name);
    if (i === undefined) return;
    this.at.delete(name);
    const last = this.names.length - 1;
    const lastName = this.names.pop()!;
    const lastTime = this.times.pop()!;
    if (i === last) return;
    this.names[i] = lastName;
    this.times[i] = lastTime;
    this.at.set(lastName, i);
    this.up(i);
    this.down(this.at.get(lastName)!);
  }

  /** Takes the earliest name out if it is due at `now` (its time <= now); undefined when none is. */
  popDue(now: number): string | undefined {
    if (this.names.length === 0 || this.times[0]! > now) return undefined;
    const name = this.names[0]!;
    this.delete(name);
    return name;
  }

  private up(i: number): void {
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (this.times[parent]! <= this.times[i]!) return;
      this.swap(i, parent);
      i = parent;
    }
  }

  private down(i: number): void {
    const n = this.names.length;
    for (;;) {
      const left = 2 * i + 1;
      const right = left + 1;
      let least = i;
      if (left < n && this.times[left]! < this.times[least]!) least = left;
      if (right < n && this.times[right]! < this.times[least]!) least = right;
      if (least === i) return;
      this.swap(i, least);
      i = least;
    }
  }

  private swap(i: number, j: number): void {
    const name = this.names[i]!;
    const time = this.times[i]!;
    this.names[i] = this.names[j]!;
    this.times[i] = this.times[j]!;
    this.names[j] = name;
    this.times[j] = time;
    this.at.set(this.names[i]!, i);
    this.at.set(name, j);
  }
}
