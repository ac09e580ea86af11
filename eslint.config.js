import js from '@eslint/js';
import tseslint from 'typescript-eslint';

// The rooms of src/ (docs/architecture.md): what each layer may import. In flat config a later block replaces a
// rule's options rather than adding to them, so each folder's block lists every restriction that holds there.
const ARCHITECTURE = 'see docs/architecture.md';
/** Import patterns (gitignore syntax, matched against the import's path) of the named src/ folders. */
const folders = (...names) => names.map((name) => `**/${name}/**`);
const LOADING_THE_ADDON = {
  group: ['node-gyp-build', '**/*.node'],
  message: `only src/native/load.ts loads the addon; call loadNative() from there (${ARCHITECTURE}, "The native surface")`,
};
/** Loading the addon by a call: require('node-gyp-build'), createRequire(...)('x.node'), import('y.node'), process.dlopen. */
const ADDON_LOADING_CALLS = [
  'CallExpression[callee.type!="MemberExpression"] > Literal.arguments[value=/^node-gyp-build$|\\.node$/]',
  'ImportExpression > Literal.source[value=/^node-gyp-build$|\\.node$/]',
  'MemberExpression[object.name="process"][property.name="dlopen"]',
].map((selector) => ({ selector, message: LOADING_THE_ADDON.message }));
const roomRules = (...patterns) => ({
  '@typescript-eslint/no-restricted-imports': ['error', { patterns: [LOADING_THE_ADDON, ...patterns] }],
  'no-restricted-syntax': ['error', ...ADDON_LOADING_CALLS],
});

export default tseslint.config(
  { ignores: ['dist/', 'ui/dist/', 'build/', 'third_party/', 'prebuilds/', 'node_modules/', 'logs/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['scripts/**/*.mjs', 'scripts/**/*.cjs', 'ui/build.mjs', 'eslint.config.js'],
    languageOptions: {
      globals: {
        process: 'readonly',
        console: 'readonly',
        require: 'readonly',
        __dirname: 'readonly',
        fetch: 'readonly',
        FormData: 'readonly',
        Blob: 'readonly',
        Buffer: 'readonly',
        AbortSignal: 'readonly',
      },
    },
  },
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  { files: ['src/**/*.ts'], ignores: ['src/native/**'], rules: roomRules() },
  {
    files: ['src/engines/**/*.ts'],
    rules: roomRules({
      group: folders('services', 'routes', 'http', 'sessions', 'wyoming'),
      message: `engines know nothing of HTTP, sessions or the services that call them (${ARCHITECTURE})`,
    }),
  },
  {
    files: ['src/services/**/*.ts'],
    rules: roomRules({
      group: folders('routes', 'http', 'sessions', 'wyoming'),
      message: `services know nothing of HTTP: routes and sessions call them, never the other way (${ARCHITECTURE})`,
    }),
  },
  {
    files: ['src/routes/**/*.ts', 'src/sessions/**/*.ts', 'src/wyoming/**/*.ts'],
    rules: roomRules({
      group: folders('engines', 'native'),
      allowTypeImports: true,
      message: `the protocol layer calls services, not engines or the addon; the engines' types may pass through (${ARCHITECTURE})`,
    }),
  },
);
