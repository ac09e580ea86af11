import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { splitSentences } from '../../src/services/tts/sentences.js';

describe('splitting text to speak into sentences', () => {
  it('cuts at sentence ends and line breaks, keeping every word', () => {
    const text = 'Hello there. How are you?  "Fine!" he said.\nNew line… and more (really.) Done';
    const pieces = splitSentences(text);
    assert.deepEqual(pieces, ['Hello there.', 'How are you?', '"Fine!"', 'he said.', 'New line…', 'and more (really.)', 'Done']);
    assert.equal(pieces.join(' '), text.replace(/\s+/g, ' '));
  });

  it('leaves abbreviations and numbers alone when no space follows the dot', () => {
    assert.deepEqual(splitSentences('It costs 3.50 dollars, see voxd.dev.'), ['It costs 3.50 dollars, see voxd.dev.']);
  });

  it('cuts an over-long sentence at clauses, then spaces, then anywhere, never over the limit', () => {
    const clauses = 'one two three, four five six, seven eight nine';
    assert.deepEqual(splitSentences(clauses, 16), ['one two three,', 'four five six,', 'seven eight nine']);
    const word = 'x'.repeat(25);
    const pieces = splitSentences(`${word} end`, 10);
    assert.ok(pieces.every((p) => p.length <= 10));
    assert.equal(pieces.join('').replace(/ /g, ''), `${word}end`);
  });

  it('gives nothing for blank text', () => {
    assert.deepEqual(splitSentences(' \n\t '), []);
  });
});
