// Types for the part of prebuildify (it ships none) that scripts/prebuild.mjs uses.
declare module 'prebuildify' {
  interface PrebuildifyOptions {
    cwd: string;
    out: string;
    name: string;
    napi: boolean;
    targets: string[];
    platform: string;
    arch: string;
    strip: boolean;
    tagLibc: boolean;
    nodeGyp: string;
  }
  /** Builds and strips the addon for each target, then copies it to `<out>/prebuilds/<platform>-<arch>/`. */
  export default function prebuildify(options: PrebuildifyOptions, callback: (error?: Error | null) => void): void;
}
