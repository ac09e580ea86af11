/**
 * The fuzzer's seeded random numbers: the same seed gives the same cases, so a run can be repeated from the seed
 * it prints. A Weyl sequence finalised by murmur3's 32-bit mixer: fast, and plenty for choosing inputs.
 */

/** A seed from a number or any string (a target's name, a command-line `--seed`). */
export function seedFrom(value: string | number): number {
  let h = 0x811c9dc5; // FNV-1a over the UTF-16 units
  for (const unit of String(value)) {
    h ^= unit.charCodeAt(0);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

export class Rng {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** A uniform 32-bit unsigned integer. */
  next(): number {
    this.state = (this.state + 0x9e3779b9) >>> 0;
    let z = this.state;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    return (z ^ (z >>> 16)) >>> 0;
  }

  /** Uniform in [0, 1). */
  float(): number {
    return this.next() / 0x1_0000_0000;
  }

  /** Uniform integer in [0, n). */
  below(n: number): number {
    return Math.floor(this.float() * n);
  }

  /** Uniform integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + this.below(hi - lo + 1);
  }

  chance(p: number): boolean {
    return this.float() < p;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('pick from an empty list');
    return items[this.below(items.length)]!;
  }

  /** One of `choices`, each as likely as its weight. */
  weighted<T>(choices: readonly (readonly [number, T])[]): T {
    const total = choices.reduce((sum, [weight]) => sum + weight, 0);
    let at = this.float() * total;
    for (const [weight, value] of choices) {
      if ((at -= weight) < 0) return value;
    }
    return choices[choices.length - 1]![1];
  }

  /**
   * A length in [1, max], log-uniform: as many cases of 1-10 as of 100-1000, so most inputs stay short (fast) and
   * long ones still come up.
   */
  length(max: number): number {
    return Math.min(max, Math.floor(Math.exp(this.float() * Math.log(max + 1))));
  }

  /** An independent generator for a sub-task (one per target, say), fixed by this one's seed and `label`. */
  fork(label: string): Rng {
    return new Rng(this.next() ^ seedFrom(label));
  }
}
